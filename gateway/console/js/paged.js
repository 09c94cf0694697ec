// A list read page by page with the API's cursors (`next`), with Previous
// and Next buttons. fetchPage(cursor) → {items, next}; draw(items) → node.
// The buttons stay focusable when there is no page that way (aria-disabled),
// so a keyboard user paging through does not lose their place.
import { errorBox, fill, h } from "./view.js";

export function paged(label, fetchPage, draw) {
  const cursors = [null];  // the cursor of every page seen so far; the last is the page shown
  let next = null;
  let busy = false;
  const move = (change) => () => {
    if (busy || (change < 0 ? cursors.length === 1 : !next)) return;
    if (change < 0) cursors.pop();
    else cursors.push(next);
    reload();
  };
  const content = h("div");
  const previous = h("button", { type: "button", onclick: move(-1) }, "Previous page");
  const following = h("button", { type: "button", onclick: move(1) }, "Next page");
  const pager = h("nav", { class: "pager", "aria-label": `Pages of ${label}` }, previous, following);
  const el = h("div", {}, content, pager);

  async function reload() {
    busy = true;
    try {
      const page = await fetchPage(cursors.at(-1));
      next = page.next;
      fill(content, draw(page.items));
    } catch (error) {
      fill(content, errorBox(error));
    }
    previous.setAttribute("aria-disabled", String(cursors.length === 1));
    following.setAttribute("aria-disabled", String(!next));
    busy = false;
  }

  return { el, reload };
}
