/* keras_attention playground: "Attention during training", a slider over a run's checkpoints.
 *
 * GET api/checkpoints lists the steps the run kept (with the validation BLEU of each); for the
 * selected step, POST api/checkpoint_attention answers the page's sentence with that checkpoint's
 * weights, teacher-forced on the translation the page shows, so that every step's map is over the
 * same tokens: early maps are a blur, the diagonal appears as BLEU climbs. The heatmap is the last
 * decoder layer's cross-attention, heads averaged (rows: target positions, "reads → predicts";
 * columns: source tokens), beside what that checkpoint itself says (greedy search).
 *
 * A JavaScript module, nothing from the network; text reaches the DOM only through textContent or
 * setAttribute (shared.js's h and svg).
 */
import { $, clear, h, fetchJson, isNum, postJson, sequentialColor, svg } from "./shared.js";
import { meanOverHeads, state } from "./state.js";

var DEBOUNCE_MS = 200;  // one request once the slider rests a moment

var view = {
  checkpoints: [],   // [{step, validation_bleu, final}] of GET api/checkpoints
  requestId: 0,      // the latest api/checkpoint_attention request; older answers are dropped
  timer: null,
  loaded: false,     // api/checkpoints answered
  key: null,         // "text\u0000target\u0000step" of the map shown (or asked for)
};


function bleuText(bleu) { return isNum(bleu) ? bleu.toFixed(2) : "not scored"; }

function stepLabel(checkpoint) {
  return "step " + checkpoint.step + " · validation BLEU " + bleuText(checkpoint.validation_bleu) +
    (checkpoint.final ? " · the weights the run ended with" : "");
}

function setNote(text, kind) {
  var note = $("checkpoints-status");
  note.textContent = text || "";
  note.className = "status" + (kind ? " " + kind : "");
}

function selected() {
  var index = Number($("checkpoint-step").value);
  return view.checkpoints[Math.max(0, Math.min(view.checkpoints.length - 1, index))];
}

// -- the list of checkpoints -------------------------------------------------------------

function showNone(text) {
  $("checkpoints-body").hidden = true;
  var note = $("checkpoints-none");
  note.hidden = false;
  note.textContent = text;
}

function renderList(answer) {
  view.checkpoints = (answer && Array.isArray(answer.checkpoints) ? answer.checkpoints : [])
    .filter(function (c) { return c && isNum(c.step); });
  view.loaded = true;
  if (!view.checkpoints.length) {
    showNone((answer && answer.note) || "This model comes without the checkpoints of its training.");
    return;
  }
  $("checkpoints-none").hidden = true;
  $("checkpoints-body").hidden = false;
  var slider = $("checkpoint-step");
  slider.min = "0";
  slider.max = String(view.checkpoints.length - 1);
  slider.value = String(view.checkpoints.length - 1);  // the last step first
  slider.disabled = view.checkpoints.length < 2;
  slider.setAttribute("data-steps", JSON.stringify(view.checkpoints.map(function (c) { return c.step; })));
  var ticks = clear($("checkpoint-ticks"));
  view.checkpoints.forEach(function (c, i) {
    ticks.appendChild(h("option", { value: i, label: String(c.step), "data-step": c.step }));
  });
  renderSparkline();
  showLabel();
  request();
}

function showLabel() {
  var checkpoint = selected();
  if (!checkpoint) return;
  $("checkpoint-step").setAttribute("aria-valuetext", stepLabel(checkpoint));
  $("checkpoint-label").textContent = stepLabel(checkpoint);
  var dots = document.querySelectorAll("#checkpoint-bleu .spark-dot");
  Array.prototype.forEach.call(dots, function (dot) {
    dot.setAttribute("class", "spark-dot" + (Number(dot.getAttribute("data-step")) === checkpoint.step ? " selected" : ""));
  });
}

// Validation BLEU over the steps, one dot per checkpoint (a gap where a step was not scored).
function renderSparkline() {
  var box = clear($("checkpoint-bleu"));
  var scored = view.checkpoints.filter(function (c) { return isNum(c.validation_bleu); });
  box.hidden = scored.length < 2;
  if (box.hidden) return;
  var W = 220, H = 44, pad = 5;
  var first = view.checkpoints[0].step, last = view.checkpoints[view.checkpoints.length - 1].step;
  var top = Math.max.apply(null, scored.map(function (c) { return c.validation_bleu; }).concat([1]));
  function x(step) { return pad + (last > first ? (step - first) / (last - first) : 0.5) * (W - 2 * pad); }
  function y(bleu) { return H - pad - (bleu / top) * (H - 2 * pad); }
  var chart = svg("svg", { width: W, height: H, viewBox: "0 0 " + W + " " + H, role: "img",
                                "aria-label": "Validation BLEU over the training steps" });
  chart.appendChild(svg("line", { class: "spark-axis", x1: pad, x2: W - pad, y1: H - pad, y2: H - pad }));
  chart.appendChild(svg("polyline", { class: "spark-line", points: scored.map(function (c) {
    return x(c.step).toFixed(1) + "," + y(c.validation_bleu).toFixed(1);
  }).join(" ") }));
  scored.forEach(function (c) {
    chart.appendChild(svg("circle", { class: "spark-dot", cx: x(c.step).toFixed(1),
                                           cy: y(c.validation_bleu).toFixed(1), r: 3, "data-step": c.step },
      svg("title", { text: stepLabel(c) })));
  });
  box.appendChild(h("span", { class: "muted", text: "Validation BLEU " }));
  box.appendChild(chart);
}

// -- one checkpoint's attention ------------------------------------------------------------

function pageSentence() {  // {text, target} of the answer the page shows, or null
  var data = state.data;
  if (!data || typeof data.source !== "string") return null;
  var best = Array.isArray(data.translations) && data.translations[0];
  return { text: data.source, target: best && typeof best.text === "string" ? best.text : "" };
}

function request() {
  clearTimeout(view.timer);
  view.timer = null;
  var checkpoint = selected(), sentence = pageSentence();
  if (!checkpoint || !sentence || state.staticMode) return;
  var key = [sentence.text, sentence.target, checkpoint.step].join("\u0000");
  if (key === view.key) return;  // shown already, or on its way
  view.key = key;
  var id = ++view.requestId;
  setNote("Loading step " + checkpoint.step + "…", "busy");
  var body = { text: sentence.text, step: checkpoint.step };
  if (sentence.target) body.target = sentence.target;
  postJson("api/checkpoint_attention", body).then(function (answer) {
    if (id !== view.requestId) return;  // the slider moved on meanwhile
    render(answer);
    setNote("");
  }, function (error) {
    if (id !== view.requestId) return;
    view.key = null;
    setNote("Error: " + error.message, "error");
  });
}

function requestSoon() {
  showLabel();
  clearTimeout(view.timer);
  view.timer = setTimeout(request, DEBOUNCE_MS);
}

function render(answer) {
  var own = answer.checkpoint_translation || {};
  var ownBox = clear($("checkpoint-translation"));
  ownBox.appendChild(h("span", { class: "muted", text: "What step " + answer.step + " says (greedy): " }));
  ownBox.appendChild(h("span", { id: "checkpoint-own", class: "checkpoint-own",
                                 text: own.text ? own.text : "(nothing: an empty translation)" }));
  var heatmap = clear($("checkpoint-heatmap"));
  heatmap.setAttribute("data-step", answer.step);
  heatmap.setAttribute("data-source", answer.source);
  var A = answer.attention && answer.attention.cross;
  if (!A || !Array.isArray(A.weights) || !A.weights.length) {
    heatmap.appendChild(h("p", { class: "placeholder", text: "No tokens: type a sentence." }));
    return;
  }
  var layer = A.weights.length - 1;
  var rows = Array.isArray(A.query_tokens) ? A.query_tokens : [];
  var cols = Array.isArray(A.key_tokens) ? A.key_tokens : [];
  var predicts = Array.isArray(answer.target_tokens) ? answer.target_tokens : [];
  var weights = meanOverHeads(A.weights[layer], rows.length, cols.length);
  heatmap.setAttribute("data-layer", layer);
  var table = h("table", { class: "checkpoint-table", "aria-label": "Cross-attention of the last decoder layer, heads averaged, at step " + answer.step });
  var head = h("tr", null, h("th", { class: "corner", text: "reads → predicts" }));
  cols.forEach(function (token) { head.appendChild(h("th", { class: "col-label", text: token })); });
  table.appendChild(h("thead", null, head));
  var tbody = h("tbody");
  rows.forEach(function (token, i) {
    var label = token + " → " + (predicts[i] !== undefined ? predicts[i] : "");
    var tr = h("tr", null, h("th", { class: "row-label", text: label }));
    cols.forEach(function (source, j) {
      var w = weights[i][j];
      tr.appendChild(h("td", { class: "checkpoint-cell", "data-row": i, "data-col": j,
                               "data-value": w.toPrecision(6), style: "background:" + sequentialColor(w),
                               title: label + " · " + source + ": " + w.toFixed(3) }));
    });
    tbody.appendChild(tr);
  });
  table.appendChild(tbody);
  heatmap.appendChild(h("div", { class: "table-scroll" }, table));
  heatmap.appendChild(h("p", { class: "mv-legend", text: "Layer " + (layer + 1) + " of " + A.weights.length +
    ", the mean of " + A.weights[layer].length + " heads; darker = more weight." }));
}

// -- start -----------------------------------------------------------------------------------

function onResponse() {
  if (view.loaded && view.checkpoints.length) request();
}

export function startCheckpoints() {
  var section = $("checkpoints-section");
  if (!section) return;
  $("checkpoint-step").addEventListener("input", requestSoon);
  document.addEventListener("playground:response", onResponse);
  if (state.staticMode || $("playground-data")) {
    showNone("The attention during training needs the live playground server (run it with --workdir " +
             "on a run that kept checkpoints).");
    return;
  }
  fetchJson("api/checkpoints").then(renderList, function (error) {
    showNone("Could not list the checkpoints: " + error.message);
  });
}

