/* keras_attention playground: "Which source words mattered?", three attributions side by side.
 *
 * For the translation the page shows (translated, continued from a prefix, or the user's own:
 * the answer's target_ids, so all three explain the same tokens), POST api/attributions answers
 * three [T, S] matrices (rows: target tokens, columns: source tokens, each row summing to 1):
 * raw attention (the last decoder layer's cross-attention, heads averaged), attention rollout
 * and input × gradient, with the share of rows whose most-attributed source word is the same as
 * raw attention's.
 *
 * A JavaScript module, nothing from the network; text reaches the DOM only through textContent or
 * setAttribute (shared.js's h and svg).
 */
import { $, clear, h, isNum, postJson, sequentialColor } from "./shared.js";
import { state } from "./state.js";

var METHODS = [
  { key: "attention", title: "Raw attention (last layer, heads averaged)" },
  { key: "rollout", title: "Attention rollout" },
  { key: "input_x_gradient", title: "Input × gradient" },
];

var view = {
  requestId: 0,  // the latest api/attributions request; older answers are dropped
  key: null,     // "text\u0000target ids" of the maps shown (or asked for)
};


function setNote(text, kind) {
  var note = $("attribution-status");
  note.textContent = text || "";
  note.className = "status" + (kind ? " " + kind : "");
}

function pageSentence() {  // {text, target: ids} of the answer the page shows, or null
  var data = state.data;
  if (!data || typeof data.source !== "string") return null;
  var ids = Array.isArray(data.target_ids) ? data.target_ids : null;
  return { text: data.source, target: ids };
}

function request() {
  var sentence = pageSentence();
  if (!sentence) return;
  if (state.staticMode || $("playground-data")) {
    setNote("The attributions need the live playground server (python3 run.py playground).");
    return;
  }
  var key = sentence.text + "\u0000" + JSON.stringify(sentence.target);
  if (key === view.key) return;  // shown already, or on its way
  view.key = key;
  var id = ++view.requestId;
  // The maps shown are another translation's: gone until this one's arrive.
  var maps = clear($("attribution-maps"));
  maps.removeAttribute("data-source");
  maps.setAttribute("aria-busy", "true");
  setNote("Computing the attributions…", "busy");
  var body = { text: sentence.text };
  if (sentence.target && sentence.target.length) body.target = sentence.target;
  postJson("api/attributions", body).then(function (answer) {
    if (id !== view.requestId) return;  // a newer translation's: this one is out of date
    render(answer);
    setNote("");
  }, function (error) {
    if (id !== view.requestId) return;
    view.key = null;
    $("attribution-maps").removeAttribute("aria-busy");
    setNote("Error: " + error.message, "error");
  });
}

function agreementText(method, answer) {
  if (method.key === "attention") return "the reference of the agreements";
  var share = answer.agreement ? answer.agreement[method.key] : null;
  if (!isNum(share)) return "agreement with raw attention: none (no source words)";
  return "agrees with raw attention on " + Math.round(share * 100) + "% of the rows " +
    "(the most-attributed source word)";
}

function heatmap(method, answer) {
  var matrix = Array.isArray(answer[method.key]) ? answer[method.key] : [];
  var rows = answer.target_tokens || [], cols = answer.source_tokens || [];
  var box = h("figure", { class: "attribution-map", "data-method": method.key });
  box.appendChild(h("figcaption", null, h("strong", { text: method.title }),
    h("span", { class: "muted attribution-agreement", "data-method": method.key,
                "data-agreement": isNum((answer.agreement || {})[method.key]) ? answer.agreement[method.key] : "",
                text: agreementText(method, answer) })));
  var table = h("table", { class: "attribution-table", "aria-label": method.title +
                           ": rows are the target tokens, columns the source tokens" });
  var head = h("tr", null, h("th", { class: "corner", text: "target ↓ source →" }));
  cols.forEach(function (token) { head.appendChild(h("th", { class: "col-label", text: token })); });
  table.appendChild(h("thead", null, head));
  var tbody = h("tbody");
  rows.forEach(function (token, i) {
    var tr = h("tr", null, h("th", { class: "row-label", text: token }));
    var row = matrix[i] || [];
    cols.forEach(function (source, j) {
      var w = isNum(row[j]) ? row[j] : 0;
      tr.appendChild(h("td", { class: "attribution-cell", "data-method": method.key, "data-row": i,
                               "data-col": j, "data-value": String(w),
                               style: "background:" + sequentialColor(Math.sqrt(Math.max(0, w))),
                               title: method.title + " · " + token + " ← " + source + ": " + w.toFixed(3) }));
    });
    tbody.appendChild(tr);
  });
  table.appendChild(tbody);
  box.appendChild(h("div", { class: "table-scroll" }, table));
  box.appendChild(h("p", { class: "mv-legend", text: "Each row sums to 1; darker = a larger share " +
    "(the colour follows √share, on the same scale in all three maps)." }));
  return box;
}

function render(answer) {
  var maps = clear($("attribution-maps"));
  maps.removeAttribute("aria-busy");
  maps.setAttribute("data-source", answer.source);
  if (!answer.target_tokens || !answer.target_tokens.length) {
    maps.appendChild(h("p", { class: "placeholder", text: "No tokens: type a sentence." }));
    return;
  }
  METHODS.forEach(function (method) { maps.appendChild(heatmap(method, answer)); });
}

export function startAttributions() {
  if (!$("attribution-section")) return;
  document.addEventListener("playground:response", request);
  request();  // the page may have answered already
}

