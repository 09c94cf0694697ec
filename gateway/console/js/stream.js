// The gateway's event stream (WebSocket /v1/stream). The key goes in the
// subprotocol list, never in the URL: ["tally.v1", "tally.key." + base64url(key)].
// On every (re)connection the subscription is sent again; the gateway then
// sends the current state of each object, so nothing between two
// connections is missed.
import { session } from "./api.js";
import { h } from "./view.js";

function base64url(text) {
  const bytes = new TextEncoder().encode(text);
  let binary = "";
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
}

// follow({sagas: [...], accounts: [...]}, onMessage, onStatus) → stop().
// onStatus gets "connecting", "live" or "reconnecting"; onMessage each
// saga or account message (pings are dropped, errors passed on).
export function follow(topics, onMessage, onStatus) {
  let socket = null;
  let stopped = false;
  let delay = 500;
  let timer = null;

  function connect() {
    onStatus("connecting");
    const url = `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/v1/stream`;
    socket = new WebSocket(url, ["tally.v1", `tally.key.${base64url(session.key() ?? "")}`]);
    socket.onopen = () => {
      delay = 500;
      socket.send(JSON.stringify({ op: "subscribe", ...topics }));
      onStatus("live");
    };
    socket.onmessage = (event) => {
      let message;
      try { message = JSON.parse(event.data); } catch { return; }
      if (message.type !== "ping") onMessage(message);
    };
    socket.onclose = () => {
      if (stopped) return;
      onStatus("reconnecting");
      timer = setTimeout(connect, delay);
      delay = Math.min(delay * 2, 10000);
    };
  }

  connect();
  return () => {
    stopped = true;
    clearTimeout(timer);
    socket?.close();
  };
}

// A small indicator of the stream's state for a page header: {el, update(status)}.
export function liveBadge() {
  const labels = { connecting: "connecting…", live: "live", reconnecting: "reconnecting…" };
  const el = h("span", { class: "live", role: "status" });
  const update = (status) => {
    el.dataset.status = status;
    el.textContent = `Updates: ${labels[status]}`;
  };
  update("connecting");
  return { el, update };
}
