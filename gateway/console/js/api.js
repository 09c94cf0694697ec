// The gateway's HTTP API, same origin. The operator key lives in
// sessionStorage (gone when the tab closes) and only ever travels in the
// Authorization header.
const KEY = "tally.operator_key";

export const session = {
  key: () => sessionStorage.getItem(KEY),
  set: (key) => sessionStorage.setItem(KEY, key),
  clear: () => sessionStorage.removeItem(KEY),
};

// A failed call, in the API's error shape (API.md "Errors").
class ApiError extends Error {
  constructor(status, code, message, requestId) {
    super(message);
    this.status = status;
    this.code = code;
    this.requestId = requestId;
  }
}

// Called with the error when the key is refused (401) or may not use the
// operator routes (403): the app sends the operator back to the sign-in form.
let onKeyRefused = () => {};
export function whenKeyRefused(handler) { onKeyRefused = handler; }

export async function call(method, path, { body, query, key = session.key() } = {}) {
  const url = new URL(path, location.origin);
  for (const [name, value] of Object.entries(query ?? {}))
    if (value !== undefined && value !== null && value !== "") url.searchParams.set(name, value);
  const headers = { Accept: "application/json" };
  if (key) headers.Authorization = `Bearer ${key}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body),
                                  cache: "no-store" });
  } catch (e) {
    throw new ApiError(0, "network", `the gateway could not be reached (${e.message})`, null);
  }
  const text = await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { /* reported below when the call failed */ }
  if (response.ok) return data;
  const e = data?.error;
  const error = new ApiError(response.status, e?.code ?? `http_${response.status}`,
                             e?.message ?? (text.slice(0, 200) || response.statusText),
                             e?.request_id ?? response.headers.get("X-Request-Id"));
  if (response.status === 401 || response.status === 403) onKeyRefused(error);
  throw error;
}

export const get = (path, query) => call("GET", path, { query });
// Operator actions (retry, abort, unfreeze) take the body {}.
export const act = (path) => call("POST", path, { body: {} });
export const enc = encodeURIComponent;
