// Boost.URL's implementation, compiled once here: Debian 12 ships it as
// headers only (no libboost_url).
#include <boost/url/src.hpp>
