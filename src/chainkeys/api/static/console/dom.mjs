// Building the page. Every value the service returns is put in as text (textContent
// or a text node), never as markup; text that came in with a request (names, memos,
// labels, recipients) is isolated from its neighbours (<bdi>, unicode-bidi: isolate)
// and its control and bidi characters are shown as code points (⟨U+202E⟩), so
// nothing can reorder what a person reads next to it.

export const BIDI_AND_CONTROL = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]/g;

/** An element: h("a", {href: "#/x", class: "y"}, "text", child, ...). */
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "dataset") Object.assign(el.dataset, value);
    else if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** Text that came from outside (a request, a label): isolated, invisible characters shown. */
export function untrusted(text) {
  const value = text === null || text === undefined ? "" : String(text);
  const bdi = h("bdi", { class: "untrusted" });
  let last = 0;
  for (const m of value.matchAll(BIDI_AND_CONTROL)) {
    bdi.append(value.slice(last, m.index));
    const code = m[0].codePointAt(0).toString(16).toUpperCase().padStart(4, "0");
    bdi.append(h("span", { class: "codepoint", title: "an invisible control or bidi character" },
      `⟨U+${code}⟩`));
    last = m.index + m[0].length;
  }
  bdi.append(value.slice(last));
  return bdi;
}

/** A JSON value pretty-printed, in a <pre>: the layout (indents, line breaks, brackets)
 * is the console's own text; each key and string came from the service and is shown
 * as untrusted, in its JSON form (a newline in a value reads \n, a bidi control its
 * code point), so it cannot pass for a line of the layout. */
export function pretty(value) {
  const out = [];
  const walk = (v, indent) => {
    const inner = indent + "  ";
    if (v !== null && typeof v === "object") {
      const entries = Array.isArray(v) ? v.map((x) => [null, x]) : Object.entries(v);
      const [open, close] = Array.isArray(v) ? ["[", "]"] : ["{", "}"];
      if (!entries.length) return out.push(open + close);
      out.push(`${open}\n`);
      entries.forEach(([key, x], i) => {
        out.push(inner);
        if (key !== null) out.push(h("span", { class: "key" }, untrusted(JSON.stringify(key))), ": ");
        walk(x, inner);
        out.push(i < entries.length - 1 ? ",\n" : "\n");
      });
      return out.push(indent + close);
    }
    return out.push(typeof v === "string" ? untrusted(JSON.stringify(v)) : String(JSON.stringify(v) ?? null));
  };
  walk(value, "");
  return h("pre", { class: "json" }, out);
}

/** An integer of a denom's smallest unit, named as people read it: `900000 litoshi`
 * (`base_unit`, the family's name for it; never the ticker the denom may be). A record
 * from before base units were named says what the integer counts in words. */
export function baseAmount(value, denom, baseUnit) {
  return baseUnit ? `${value} ${baseUnit}` : `${value} base units of ${denom}`;
}

/** An amount record ({denom, amount, base_unit, display?}): display units beside base
 * units, `0.009 LTC (900000 litoshi)`. */
export function amount(a) {
  if (!a) return "—";
  const base = baseAmount(a.amount, a.denom, a.base_unit);
  return a.display ? `${a.display} (${base})` : base;
}

export function amounts(list) {
  return list && list.length ? list.map(amount).join(", ") : "—";
}

/** A base-unit integer string as display units (BigInt: amounts pass 2^53). */
export function inUnits(value, unit, decimals) {
  if (unit === undefined || decimals === undefined) return null;
  const n = BigInt(value);
  const scale = 10n ** BigInt(decimals);
  const frac = (n % scale).toString().padStart(decimals, "0").replace(/0+$/, "");
  return `${n / scale}${frac ? "." + frac : ""} ${unit}`;
}

const LOCAL = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "medium" });

/** A moment (milliseconds since the epoch, or the API's ISO text) as people read it:
 * the browser's local date and time, in a <time> whose title and datetime hold the
 * ISO time in UTC (what the API, the audit export and other people's screens say). */
export function when(at) {
  if (at === null || at === undefined || at === "") return "—";
  const date = new Date(typeof at === "string" && !/^[0-9]+$/.test(at) ? at : Number(at));
  if (Number.isNaN(date.getTime())) return String(at);
  const iso = date.toISOString();
  return h("time", { datetime: iso, title: iso }, LOCAL.format(date));
}

/** A description list of [term, value, options] rows. */
export function facts(rows) {
  const dl = h("dl", { class: "facts" });
  for (const [term, value, opts = {}] of rows) {
    if (value === undefined) continue;
    dl.append(h("dt", {}, term), h("dd", { class: opts.warn ? "warn" : null }, value));
  }
  return dl;
}

/** A table: headers and rows of cells (text or nodes), in its scroll box. */
export function table(caption, headers, rows, opts = {}) {
  const head = h("tr", {}, headers.map((t) => h("th", { scope: "col" }, t)));
  const body = h("tbody", {}, rows.map((cells) => h("tr", {}, cells.map((c) => h("td", {}, c)))));
  return scrolling(h("table", { class: opts.class || "list" },
    caption ? h("caption", {}, caption) : null, h("thead", {}, head), body), caption || headers.join(", "));
}

/** A wide thing (a table) in a box of its own that scrolls sideways when the screen is
 * narrower than it (a phone), so the page itself never does; the box takes the keyboard
 * focus (arrow keys scroll it) and is named for screen readers. */
export function scrolling(node, name) {
  return h("div", { class: "scroll", tabindex: "0", role: "region", "aria-label": name }, node);
}

/** A copy button for `value` (a clipboard where the browser allows it, else selected). */
export function copyButton(value, label = "Copy") {
  const button = h("button", { type: "button", class: "copy", "aria-label": `${label}: ${value.slice(0, 24)}…` }, label);
  button.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(value);
      button.textContent = "Copied";
    } catch {
      const code = button.previousElementSibling;
      if (code) window.getSelection().selectAllChildren(code);
      button.textContent = "Selected: press Ctrl+C";
    }
    setTimeout(() => { button.textContent = label; }, 2000);
  });
  return button;
}

/** A value shown in monospace with a copy button beside it. */
export function copyable(value, label) {
  return h("span", { class: "copyable" }, h("code", {}, value), " ", copyButton(value, label));
}

/** A link inside the console: its parts are encoded, it is always a #/ route. */
export function link(text, route, params = {}) {
  const query = new URLSearchParams(Object.entries(params).filter(([, v]) => v !== undefined && v !== null && v !== ""));
  const path = route.map(encodeURIComponent).join("/");
  return h("a", { href: `#/${path}${query.size ? "?" + query : ""}` }, text);
}

export function heading(text) {
  return h("h1", { tabindex: "-1" }, text);
}
