#pragma once
// Rows in and out of statements, by column name rather than position.
// Out: a result's rows read through an enum that names the statement's
// columns in select order. In: rows of a struct sent as one array parameter
// per column (the shape unnest() takes), the columns given as a tuple of
// projections (a data member pointer or a function of the row).
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include "common/pg/connection.hpp"

namespace tally::pg {

// One row of a result; `Column` is an enum whose values are the
// statement's columns in select order.
template <class Column>
requires std::is_enum_v<Column>
class row {
 public:
  row(const result& r, int index) : r_(&r), index_(index) {}
  bool is_null(Column c) const { return r_->is_null(index_, at(c)); }
  std::string_view text(Column c) const { return r_->text(index_, at(c)); }
  std::int64_t int64(Column c) const { return r_->int64(index_, at(c)); }
  std::optional<std::int64_t> opt_int64(Column c) const { return r_->opt_int64(index_, at(c)); }
  bool boolean(Column c) const { return r_->boolean(index_, at(c)); }

 private:
  static int at(Column c) { return static_cast<int>(c); }
  const result* r_;
  int index_;
};

// Every row of a result, for a range-for: `for (auto r : rows_of<col>(res))`.
template <class Column>
class rows_of {
 public:
  explicit rows_of(const result& r) : r_(&r) {}
  class iterator {
   public:
    iterator(const result* r, int index) : r_(r), index_(index) {}
    row<Column> operator*() const { return {*r_, index_}; }
    iterator& operator++() {
      ++index_;
      return *this;
    }
    bool operator==(const iterator& o) const { return index_ == o.index_; }

   private:
    const result* r_;
    int index_;
  };
  iterator begin() const { return {r_, 0}; }
  iterator end() const { return {r_, r_->rows()}; }

 private:
  const result* r_;
};

namespace detail {
template <class T>
const T& deref(const T& row) {
  return row;
}
template <class T>
const T& deref(const T* row) {
  return *row;
}
}  // namespace detail

// The array parameter of one column of `rows` (structs or pointers to
// them). A column is an integer, text (a reference to a string the row
// keeps, or a string_view of static storage) or a nullable `param`.
template <class Rows, class Column>
std::string array_of(const Rows& rows, const Column& column) {
  using value = decltype(std::invoke(column, detail::deref(*std::begin(rows))));
  using plain = std::remove_cvref_t<value>;
  static_assert(!std::is_same_v<value, std::string>, "a text column must not be a temporary string");
  using item = std::conditional_t<std::is_integral_v<plain>, std::int64_t,
                                  std::conditional_t<std::is_same_v<plain, param>, param, std::string_view>>;
  std::vector<item> items;
  items.reserve(std::size(rows));
  for (const auto& r : rows) items.emplace_back(std::invoke(column, detail::deref(r)));
  return array_literal(std::span<const item>(items));
}

// One array parameter per column of `columns` (a tuple), in its order.
template <class Rows, class... Columns>
std::vector<param> arrays_of(const Rows& rows, const std::tuple<Columns...>& columns) {
  std::vector<param> out;
  out.reserve(sizeof...(Columns));
  std::apply([&](const auto&... column) { (out.emplace_back(array_of(rows, column)), ...); }, columns);
  return out;
}

}  // namespace tally::pg
