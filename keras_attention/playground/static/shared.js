/* keras_attention playground: what every view uses. DOM helpers (every piece of text from the
 * data reaches the DOM through textContent or setAttribute, never innerHTML, so tokens such as
 * "<b>" or "&amp;" are shown as they are), number formats and colours, the softmax, and the JSON
 * API's client: fetchJson / postJson (a server's {"error": ...} becomes an Error) and
 * unpackArrays (the API's packed float32 arrays back to nested arrays).
 */
export const ARROW = " → ";
var SVG_NS = "http://www.w3.org/2000/svg";

// -- small DOM helpers (text always via textContent / setAttribute) ------------------------

export function $(id) { return document.getElementById(id); }

function setAttrs(node, attrs) {
  if (!attrs) return node;
  Object.keys(attrs).forEach(function (name) {
    var value = attrs[name];
    if (value === null || value === undefined || value === false) return;
    if (name === "text") node.textContent = String(value);
    else if (name.slice(0, 2) === "on" && typeof value === "function") {
      node.addEventListener(name.slice(2), value);
    } else node.setAttribute(name, value === true ? "" : String(value));
  });
  return node;
}

function appendAll(node, children) {
  children.forEach(function (child) {
    if (child === null || child === undefined || child === false) return;
    if (Array.isArray(child)) appendAll(node, child);
    else if (typeof child === "string" || typeof child === "number") {
      node.appendChild(document.createTextNode(String(child)));
    } else node.appendChild(child);
  });
  return node;
}

export function h(tag, attrs) {
  var node = setAttrs(document.createElement(tag), attrs);
  return appendAll(node, Array.prototype.slice.call(arguments, 2));
}

export function svg(tag, attrs) {
  var node = setAttrs(document.createElementNS(SVG_NS, tag), attrs);
  return appendAll(node, Array.prototype.slice.call(arguments, 2));
}

export function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
  return node;
}

// -- numbers and colors --------------------------------------------------------------------

export function isNum(x) { return typeof x === "number" && isFinite(x); }

function minus(text) { return text.replace(/^-/, "−"); }

export function fixed(x, digits) {
  if (x === -Infinity) return "−∞";
  if (!isNum(x)) return "–";
  return minus(x.toFixed(digits));
}

export function sig(x, digits) {
  if (!isNum(x)) return "–";
  return minus(Number(x.toPrecision(digits)).toString());
}

export function sci(x) {
  if (!isNum(x)) return "–";
  if (x === 0) return "0";
  return minus(x.toExponential(1)).replace("e-", "e−").replace("e+", "e");
}

export function percent(p) { return isNum(p) ? (100 * p).toFixed(1) + "%" : "–"; }


export function mix(a, b, t) {
  return [0, 1, 2].map(function (i) { return Math.round(a[i] + (b[i] - a[i]) * t); });
}

var BLUES = [[247, 251, 255], [107, 174, 214], [8, 48, 107]];

export function sequentialRgb(t) {  // t in [0, 1] -> white .. dark blue
  t = Math.max(0, Math.min(1, isNum(t) ? t : 0));
  return t < 0.5 ? mix(BLUES[0], BLUES[1], t * 2) : mix(BLUES[1], BLUES[2], t * 2 - 1);
}

export function sequentialColor(t) {  // t in [0, 1] -> white .. dark blue, as CSS
  return "rgb(" + sequentialRgb(t).join(",") + ")";
}

export function divergingColor(x, maxAbs) {  // blue (negative) .. white .. red (positive)
  var t = maxAbs > 0 && isNum(x) ? Math.max(-1, Math.min(1, x / maxAbs)) : 0;
  var rgb = t < 0 ? mix([247, 247, 247], [33, 102, 172], -t) : mix([247, 247, 247], [178, 24, 43], t);
  return "rgb(" + rgb.join(",") + ")";
}

export function maxAbs(vectors) {
  var m = 0;
  vectors.forEach(function (v) {
    (v || []).forEach(function (x) { if (isNum(x) && Math.abs(x) > m) m = Math.abs(x); });
  });
  return m;
}

export function isSpecial(token) { return /^\[[A-Z]+\]$/.test(String(token)); }

export function onActivate(action) {  // Enter or space on a focusable element = a click
  return function (event) {
    if (event.key === "Enter" || event.key === " ") {
      event.preventDefault();
      action();
    }
  };
}

export function softmax(logits) {
  var max = -Infinity;
  logits.forEach(function (x) { if (x > max) max = x; });
  if (max === -Infinity) return logits.map(function () { return 0; });
  var exps = logits.map(function (x) { return x === -Infinity ? 0 : Math.exp(x - max); });
  var sum = exps.reduce(function (a, b) { return a + b; }, 0);
  return exps.map(function (e) { return e / sum; });
}

// -- talking to the server -----------------------------------------------------------------

function errorMessage(body, response) {
  if (body && typeof body === "object" && body.error !== undefined) return String(body.error);
  return "the server answered " + response.status + " " + (response.statusText || "");
}

// The API packs big float arrays (an answer's q, k, v and outputs) as {"dtype": "float32",
// "shape": [...], "base64": little-endian bytes}: back to the nested arrays the views index.
function isPacked(x) {
  return x && typeof x === "object" && x.dtype === "float32" && typeof x.base64 === "string" &&
    Array.isArray(x.shape);
}

function unpackArray(x) {
  var bytes = atob(x.base64), buffer = new ArrayBuffer(bytes.length), u8 = new Uint8Array(buffer);
  for (var i = 0; i < bytes.length; i++) u8[i] = bytes.charCodeAt(i);
  var view = new DataView(buffer), at = 0;
  function build(depth) {
    var out = [];
    for (var n = 0; n < x.shape[depth]; n++) {
      if (depth === x.shape.length - 1) { out.push(view.getFloat32(at, true)); at += 4; }
      else out.push(build(depth + 1));
    }
    return out;
  }
  return x.shape.length ? build(0) : view.getFloat32(0, true);
}

export function unpackArrays(value) {
  if (isPacked(value)) return unpackArray(value);
  if (Array.isArray(value)) return value.map(unpackArrays);
  if (value && typeof value === "object") {
    Object.keys(value).forEach(function (key) { value[key] = unpackArrays(value[key]); });
  }
  return value;
}

export function fetchJson(url, options) {
  return fetch(url, options).then(function (response) {
    return response.text().then(function (text) {
      var body = null;
      try { body = text ? unpackArrays(JSON.parse(text)) : null; } catch (e) { body = null; }
      if (!response.ok || body === null || (body && body.error !== undefined)) {
        var error = new Error(body ? errorMessage(body, response)
                                   : errorMessage(null, response) + " (not JSON)");
        error.fromServer = true;
        throw error;
      }
      return body;
    });
  });
}

// A JSON POST to one of the API's endpoints (fetchJson's errors).
export function postJson(url, body) {
  return fetchJson(url, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
}
