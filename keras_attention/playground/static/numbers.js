/* keras_attention playground: the numbers. How one weight was computed (q·k, the scale, the
 * mask, the softmax and the weighted values, checked against the model's own numbers), and the
 * softmax sandbox.
 */
import { $, clear, divergingColor, fixed, h, isNum, maxAbs, percent, sci, sig, softmax } from "./shared.js";
import {
  attention,
  keyTokens,
  KIND_LABELS,
  matrix,
  numHeads,
  numLayers,
  predictedToken,
  queryLabel,
  queryTokens,
  state,
} from "./state.js";

var SANDBOX_DEFAULTS = [2.0, 1.0, 0.5, 0.0, -1.0];
// -- computation view ----------------------------------------------------------------------

function strip(vector, scaleAbs, name, big) {
  var values = Array.isArray(vector) ? vector : [];
  var cellWidth = Math.max(3, Math.min(12, Math.floor(200 / Math.max(1, values.length))));
  var node = h("span", { class: "strip" + (big ? " big" : ""),
                         title: name + " (" + values.length + " numbers)" });
  values.forEach(function (x, d) {
    node.appendChild(h("span", {
      style: "width:" + cellWidth + "px;background:" + divergingColor(x, scaleAbs),
      title: name + "[" + d + "] = " + sig(x, 5),
    }));
  });
  return node;
}


// The API rounds weights and q·k to 5 significant digits and sends the vectors as float32
// numbers. A model that computes in mixed precision sends q, k, v and the outputs as
// bfloat16 (or float16) numbers: detected here
// (every value within rounding of a number with 8 (11) significant bits; a float32 model's
// numbers are not, bar chance) so that the checks allow for their precision.
var PRECISIONS = [{ name: "bfloat16", bits: 8 }, { name: "float16", bits: 11 }];

function roundToBits(x, bits) {
  var step = Math.pow(2, Math.floor(Math.log2(Math.abs(x))) - bits + 1);
  return Math.round(x / step) * step;
}

function detectPrecision(vectors) {  // {name, bits} or null (float32)
  var xs = [];
  vectors.forEach(function (v) {
    (v || []).forEach(function (x) { if (isNum(x) && x !== 0 && xs.length < 512) xs.push(x); });
  });
  if (xs.length < 8) return null;
  for (var p = 0; p < PRECISIONS.length; p++) {
    var bits = PRECISIONS[p].bits;
    if (xs.every(function (x) { return Math.abs(x - roundToBits(x, bits)) <= 6e-5 * Math.abs(x); })) {
      return PRECISIONS[p];
    }
  }
  return null;
}

function declaredPrecision(model) {  // the API may name the compute dtype
  var text = String((model && (model.compute_dtype || model.dtype_policy || model.dtype)) || "");
  for (var p = 0; p < PRECISIONS.length; p++) {
    if (text.indexOf(PRECISIONS[p].name) >= 0) return PRECISIONS[p];
  }
  return text ? null : undefined;  // undefined: not declared
}

function dot(a, b) {
  var s = 0;
  for (var d = 0; d < Math.min(a.length, b.length); d++) s += a[d] * b[d];
  return s;
}

function fillSelect(select, count, label, value) {
  clear(select);
  for (var i = 0; i < count; i++) select.appendChild(h("option", { value: i, text: label(i) }));
  if (count) select.value = String(value);
  select.disabled = !count;
}

export function renderComputation() {
  var root = clear($("computation"));
  var A = attention(state.kind);
  var qTokens = A ? queryTokens(A) : [], kTokens = A ? keyTokens(A) : [];
  fillSelect($("comp-query"), qTokens.length, function (i) { return i + ": " + queryLabel(A, state.kind, i); },
             state.query);
  fillSelect($("comp-layer"), A ? numLayers(A) : 0, function (l) { return "Layer " + (l + 1); }, state.layer);
  fillSelect($("comp-head"), A ? numHeads(A) : 0, function (n) { return "Head " + (n + 1); }, state.compHead);
  if (!A) {
    root.appendChild(h("p", { class: "placeholder", text: "No attention to show." }));
    return;
  }
  if (!qTokens.length || !kTokens.length) {
    root.appendChild(h("p", { class: "placeholder", text: "This sentence has no tokens here." }));
    return;
  }
  var l = state.layer, n = state.compHead, i = state.query;
  function pick(field) {  // [.][.] of head n (keys/values may hold fewer, shared heads)
    var x = A[field] && A[field][l];
    if (!Array.isArray(x) || !x.length) return null;
    var index = x.length === numHeads(A) ? n : Math.floor(n * x.length / numHeads(A));
    return Array.isArray(x[index]) ? x[index] : null;
  }
  var queries = pick("queries"), keys = pick("keys") || [], values = pick("values") || [];
  var dots = (pick("dot_products") || [])[i] || [];
  var weights = matrix(A, l, n)[i] || [];
  var outputs = pick("outputs");
  var output = outputs ? outputs[i] : null;
  var maskRow = Array.isArray(A.mask) && Array.isArray(A.mask[i]) ? A.mask[i] : null;
  var q = queries ? queries[i] || [] : [];
  var model = state.data.model || {};
  var dk = q.length || model.key_dim;
  var scale = isNum(state.data.scale) ? state.data.scale : (dk ? 1 / Math.sqrt(dk) : NaN);

  root.appendChild(h("p", { class: "comp-heading" },
    KIND_LABELS[state.kind] + " · layer " + (l + 1) + " · head " + (n + 1) + " · query " + i + " ",
    h("code", { id: "comp-query-label", text: "«" + queryLabel(A, state.kind, i) + "»" }),
    predictedToken(state.kind, i) === undefined ? null
      : " (the position that reads «" + qTokens[i] + "» and predicts «" + predictedToken(state.kind, i) + "»)"));
  root.appendChild(h("p", { class: "comp-formula" },
    "weightⱼ = softmax over j of ( q·kⱼ × scale + maskⱼ ),   scale = 1/√dₖ = 1/√" +
    (dk === undefined ? "?" : dk) + " = " + sig(scale, 5) +
    ",   maskⱼ = 0 if the query may see key j, else −∞;   output = Σⱼ weightⱼ · vⱼ"));

  var keyAbs = maxAbs([q].concat(keys));
  var valueAbs = maxAbs(values.concat([output || []]));
  root.appendChild(h("div", { class: "comp-vector" },
    h("span", { text: "query vector q of «" + qTokens[i] + "» (" + q.length + " numbers)" }),
    strip(q, keyAbs, "q", true)));

  var logits = [];
  var thead = h("thead", null, h("tr", null,
    h("th", { text: "j" }), h("th", { text: "key token" }), h("th", { text: "key vector kⱼ" }),
    h("th", { text: "q·kⱼ" }), h("th", { class: "op", text: "× " + sig(scale, 4) }),
    h("th", { class: "op", text: "+ mask" }), h("th", { text: "= logit" }),
    h("th", { text: "softmax weight" }), h("th", { text: "value vector vⱼ" }),
    h("th", { text: "weightⱼ · vⱼ" })));
  var tbody = h("tbody");
  var weightSum = 0, maxWeight = -1, maxIndex = -1;
  kTokens.forEach(function (token, j) {
    var allowed = !maskRow || maskRow[j] !== false;
    var d = dots[j];
    var logit = allowed ? d * scale : -Infinity;
    logits.push(allowed && isNum(logit) ? logit : -Infinity);
    var w = weights[j];
    if (isNum(w)) {
      weightSum += w;
      if (w > maxWeight) { maxWeight = w; maxIndex = j; }
    }
    var v = values[j] || [];
    var weighted = v.map(function (x) { return (isNum(w) ? w : 0) * x; });
    tbody.appendChild(h("tr", {
      "data-key-index": j, class: (allowed ? "" : "masked") + (state.key === j ? " highlight" : ""),
    },
      h("td", { class: "num", text: j }),
      h("td", { class: "key-token", text: String(token) }),
      h("td", null, strip(keys[j], keyAbs, "k" + j)),
      h("td", { class: "num", text: fixed(d, 3) }),
      h("td", { class: "num", text: isNum(d) ? fixed(d * scale, 3) : "–" }),
      h("td", { class: "num", text: allowed ? "0" : "−∞" }),
      h("td", { class: "num", text: fixed(allowed ? logit : -Infinity, 3) }),
      h("td", { class: "weight", "data-weight": isNum(w) ? w : "" },
        h("span", { class: "weight-cell" },
          h("span", { class: "num", text: fixed(w, 4) }),
          h("span", { class: "wbar", title: percent(w) },
            h("span", { style: "width:" + (isNum(w) ? (100 * Math.max(0, Math.min(1, w))).toFixed(1) : 0) + "%" })))),
      h("td", null, strip(v, valueAbs, "v" + j)),
      h("td", null, strip(weighted, valueAbs, "weight·v" + j))));
  });
  if (maxIndex >= 0) {
    var best = tbody.querySelector('tr[data-key-index="' + maxIndex + '"]');
    if (best) best.classList.add("max-weight");
  }
  var tfoot = h("tfoot", null, h("tr", null,
    h("td", { colspan: 7, text: "Σ over the keys: weights, and the output o = Σⱼ weightⱼ · vⱼ (the model's)" }),
    h("td", { class: "num", text: fixed(weightSum, 4) }),
    h("td"),
    h("td", null, output ? strip(output, valueAbs, "output", true) : "–")));
  root.appendChild(h("div", { class: "table-scroll" },
    h("table", { id: "computation-table" }, thead, tbody, tfoot)));

  // The numbers check themselves: softmax of the logits shown, q·k from the vectors shown, and
  // the weighted sum of the values shown, against the model's own weights, q·k and output.
  // Weights and q·k are rounded to 5 significant digits (relative error <= 5e-5 each), so a
  // recomputed sum of products may differ by about 1e-4 of the sum of its terms' sizes.
  var precision = declaredPrecision(model);
  if (precision === undefined) precision = detectPrecision(values.concat([output || []]));
  var recomputed = softmax(logits);
  var softmaxDiff = 0, dotDiff = 0, outDiff = 0, dotScale = 0;
  var dotOk = true, outOk = true;
  recomputed.forEach(function (p, j) {
    if (isNum(weights[j])) softmaxDiff = Math.max(softmaxDiff, Math.abs(p - weights[j]));
  });
  kTokens.forEach(function (token, j) {
    if (q.length && keys[j] && isNum(dots[j])) {
      var diff = Math.abs(dot(q, keys[j]) - dots[j]);
      var size = dot(q.map(Math.abs), keys[j].map(Math.abs));
      dotDiff = Math.max(dotDiff, diff);
      dotScale = Math.max(dotScale, Math.abs(dots[j]));
      if (diff > 3e-4 * size + 1e-6) dotOk = false;
    }
  });
  if (output) {
    output.forEach(function (o, d) {
      var s = 0, size = 0;
      kTokens.forEach(function (token, j) {
        var term = (weights[j] || 0) * ((values[j] || [])[d] || 0);
        s += term;
        size += Math.abs(term);
      });
      outDiff = Math.max(outDiff, Math.abs(s - o));
      var tolerance = precision ? 2 * Math.pow(2, -precision.bits) * (size + Math.abs(o)) + 1e-5
                                : 3e-4 * size + 1e-5;
      if (Math.abs(s - o) > tolerance) outOk = false;
    });
  }
  var allMasked = logits.every(function (x) { return x === -Infinity; });
  var sumOk = Math.abs(weightSum - (allMasked ? 0 : 1)) < 2e-3;
  // A logit rounded to 5 digits is off by up to 5e-5 of its size; a weight moves by at
  // most half that.
  var maxLogit = 0;
  logits.forEach(function (x) { if (isNum(x)) maxLogit = Math.max(maxLogit, Math.abs(x)); });
  var softmaxOk = softmaxDiff < 1e-3 + 1e-4 * maxLogit;
  var allOk = sumOk && softmaxOk && dotOk && outOk;
  var check = h("p", { id: "computation-check", class: "comp-check " + (allOk ? "ok" : "bad") },
    h("span", { class: "mark", text: allOk ? "✓ " : "✗ " }),
    "Σ weights = " + weightSum.toFixed(3) +
    " · max |softmax(logits above, computed here) − model weight| = " + sci(softmaxDiff) +
    (q.length ? " · max |q·kⱼ from the vectors − model q·kⱼ| = " + sci(dotDiff) +
                " (of |q·k| up to " + sig(dotScale, 3) + ")" : "") +
    (output ? " · max |Σ weightⱼvⱼ − model output| = " + sci(outDiff) : "") +
    (allOk ? " — the differences come only from rounding the numbers to 5 digits" +
             (precision ? " and from the model's " + precision.name + " arithmetic." : ".")
           : " — these numbers do not agree beyond rounding."));
  root.appendChild(check);
  if (precision) {
    root.appendChild(h("p", { class: "explain", text:
      "This model computes in mixed precision: its q, k and v vectors and the head outputs are " +
      precision.name + " numbers (" + precision.bits + " significant bits, about " +
      (precision.bits === 8 ? "2–3" : "3") + " decimal digits), while q·k, the softmax and the weights are float32. So Σ weightⱼ·vⱼ " +
      "computed here matches the model's output only to that precision." }));
  }
}

// -- softmax sandbox -----------------------------------------------------------------------

export function initSandbox() {
  var inputs = clear($("sandbox-inputs"));
  SANDBOX_DEFAULTS.forEach(function (x, i) {
    inputs.appendChild(h("label", { for: "sandbox-x" + i, text: "x" + (i + 1) }));
    inputs.appendChild(h("input", { id: "sandbox-x" + i, class: "sandbox-input", type: "number",
                                    step: "0.1", value: x, oninput: updateSandbox }));
  });
  var slider = $("temperature"), number = $("temperature-number");
  slider.addEventListener("input", function () { number.value = slider.value; updateSandbox(); });
  number.addEventListener("input", function () {
    var t = parseFloat(number.value);
    if (isNum(t) && t > 0) slider.value = String(Math.max(0.1, Math.min(5, t)));
    updateSandbox();
  });
  updateSandbox();
}

function updateSandbox() {
  var t = parseFloat($("temperature-number").value);
  if (!isNum(t) || t <= 0) t = parseFloat($("temperature").value);
  if (!isNum(t) || t <= 0) t = 1;
  var xs = Array.prototype.map.call(document.querySelectorAll(".sandbox-input"), function (input) {
    var x = parseFloat(input.value);
    return isNum(x) ? x : 0;
  });
  var ps = softmax(xs.map(function (x) { return x / t; }));
  var bars = clear($("sandbox-bars"));
  xs.forEach(function (x, i) {
    bars.appendChild(h("span", { class: "label", text: "x" + (i + 1) + "/T = " + fixed(x / t, 2) }));
    bars.appendChild(h("div", { class: "sandbox-bar", "data-index": i, title: percent(ps[i]) },
      h("span", { style: "width:" + (100 * ps[i]).toFixed(2) + "%" })));
    bars.appendChild(h("span", { class: "value", "data-value": ps[i], text: fixed(ps[i], 3) }));
  });
}
