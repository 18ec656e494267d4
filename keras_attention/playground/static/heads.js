/* keras_attention playground: the heads. The head view (queries left, keys right, one line
 * per weight, coloured by head), its controls (attention kind, layer, heads), and the model view
 * (every layer's and head's map at once).
 */
import { $, clear, h, isNum, isSpecial, percent, sequentialRgb, svg } from "./shared.js";
import {
  actions,
  attention,
  AVERAGE_COLOR,
  headColor,
  keyTokens,
  KIND_COLUMNS,
  KIND_LABELS,
  matrix,
  numHeads,
  numLayers,
  queryLabel,
  queryTitle,
  queryTokens,
  shownSeries,
  state,
} from "./state.js";
import { renderComputation } from "./numbers.js";

var MIN_LINE_WEIGHT = 0.002;  // lines lighter than this are invisible anyway
// -- head view controls --------------------------------------------------------------------

export function renderControls() {
  var A = attention(state.kind);
  $("kind").value = state.kind;
  var layerSelect = clear($("layer"));
  var heads = clear($("heads"));
  if (!A) return;
  for (var l = 0; l < numLayers(A); l++) {
    layerSelect.appendChild(h("option", { value: l, text: "Layer " + (l + 1) }));
  }
  layerSelect.value = String(state.layer);
  for (var n = 0; n < numHeads(A); n++) {
    var checked = !state.average && state.heads.indexOf(n) >= 0;
    heads.appendChild(h("label", {
      class: "head-toggle" + (checked ? " checked" : ""), style: "--c:" + headColor(n),
      title: "Show head " + (n + 1) + " (double-click: only this head)",
      ondblclick: onlyHead.bind(null, n),
    }, h("input", { type: "checkbox", "data-head": n, checked: checked, onchange: onHeadToggle }),
       h("span", { class: "swatch" }), "Head " + (n + 1)));
  }
  heads.appendChild(h("label", {
    class: "head-toggle" + (state.average ? " checked" : ""), style: "--c:" + AVERAGE_COLOR,
    title: "The mean of all heads' weights",
  }, h("input", { type: "checkbox", "data-head": "average", checked: state.average,
                  onchange: onHeadToggle }),
     h("span", { class: "swatch" }), "Average"));
}

function onHeadToggle(event) {
  var input = event.target;
  var head = input.getAttribute("data-head");
  if (head === "average") {
    state.average = input.checked;
    if (!state.average && !state.heads.length) state.heads = [state.compHead];
  } else {
    var n = Number(head);
    if (state.average) {  // leave the average: start from this head
      state.average = false;
      state.heads = [n];
    } else if (input.checked) {
      if (state.heads.indexOf(n) < 0) state.heads.push(n);
      state.heads.sort(function (a, b) { return a - b; });
    } else {
      state.heads = state.heads.filter(function (x) { return x !== n; });
    }
    if (state.heads.length) state.compHead = state.heads[0];
  }
  actions.renderViews();
}

function onlyHead(n, event) {
  if (event) event.preventDefault();
  state.average = false;
  state.heads = [n];
  state.compHead = n;
  actions.renderViews();
}

export function allHeads() {
  var A = attention(state.kind);
  if (!A) return;
  state.average = false;
  state.heads = [];
  for (var n = 0; n < numHeads(A); n++) state.heads.push(n);
  actions.renderViews();
}

// -- head view -----------------------------------------------------------------------------

var measureContext = null;

function textWidth(text) {
  if (!measureContext) {
    measureContext = document.createElement("canvas").getContext("2d");
    var family = getComputedStyle($("head-view")).fontFamily || "monospace";
    measureContext.font = "13px " + family;
  }
  return measureContext.measureText(String(text)).width;
}

function shortLabel(token, maxWidth) {
  var text = String(token);
  if (textWidth(text) <= maxWidth) return text;
  while (text.length > 1 && textWidth(text + "…") > maxWidth) text = text.slice(0, -1);
  return text + "…";
}

export function renderHeadView() {
  var view = clear($("head-view"));
  view.classList.remove("hovering");
  state.headLines = null;
  var A = attention(state.kind);
  if (!A) {
    view.setAttribute("viewBox", "0 0 400 40");
    view.setAttribute("width", 400);
    view.setAttribute("height", 40);
    view.appendChild(svg("text", { x: 8, y: 24, class: "empty-message",
                                   text: "No attention weights to show." }));
    return;
  }
  var qTokens = queryTokens(A), kTokens = keyTokens(A);
  var qLabels = qTokens.map(function (token, i) { return queryLabel(A, state.kind, i); });
  var Q = qTokens.length, K = kTokens.length;
  var maxLabel = 190;
  var leftW = 24 + Math.min(maxLabel, Math.max(40, Math.max.apply(null, [0].concat(qLabels.map(textWidth)))));
  var rightW = 24 + Math.min(maxLabel, Math.max(40, Math.max.apply(null, [0].concat(kTokens.map(textWidth)))));
  var columns = KIND_COLUMNS[state.kind] || ["queries", "keys"];
  leftW = Math.max(leftW, textWidth(columns[0]) * 0.85 + 12);
  // The lines take the width the card leaves (within reason).
  var weightW = 52, rowH = 22, top = 34;
  var room = view.parentNode ? view.parentNode.clientWidth : 0;
  var gap = room ? Math.max(160, Math.min(380, room - leftW - rightW - weightW - 4)) : 230;
  var x1 = leftW, x2 = leftW + gap;
  var width = Math.ceil(leftW + gap + rightW + weightW);
  var height = Math.ceil(top + Math.max(Q, K, 1) * rowH + 8);
  view.setAttribute("viewBox", "0 0 " + width + " " + height);
  view.setAttribute("width", width);
  view.setAttribute("height", height);
  view.setAttribute("data-kind", state.kind);
  view.setAttribute("data-layer", state.layer);
  view.setAttribute("data-heads", state.average ? "average" : state.heads.join(","));

  view.appendChild(svg("text", { x: x1 - 8, y: 16, "text-anchor": "end", class: "column-title",
                                 text: columns[0] }));
  view.appendChild(svg("text", { x: x2 + 8, y: 16, class: "column-title", text: columns[1] }));
  if (!Q || !K) {
    view.appendChild(svg("text", { x: 8, y: top + 14, class: "empty-message",
                                   text: "This sentence has no tokens here." }));
    return;
  }

  function rowY(index) { return top + index * rowH + rowH / 2; }

  var series = shownSeries(A);
  var byQuery = qTokens.map(function () { return []; });
  var byKey = kTokens.map(function () { return []; });
  var lines = svg("g", { class: "lines" });
  series.forEach(function (s) {
    for (var i = 0; i < Q; i++) {
      var row = s.matrix[i] || [];
      for (var j = 0; j < K; j++) {
        var w = row[j];
        if (!isNum(w) || w < MIN_LINE_WEIGHT) continue;
        var line = svg("line", {
          x1: x1, y1: rowY(i), x2: x2, y2: rowY(j), stroke: s.color,
          "stroke-opacity": Math.min(1, w).toFixed(4), "data-q": i, "data-k": j,
          "data-head": s.head,
        });
        lines.appendChild(line);
        byQuery[i].push(line);
        byKey[j].push(line);
      }
    }
  });
  view.appendChild(lines);
  state.headLines = { byQuery: byQuery, byKey: byKey, series: series };

  qTokens.forEach(function (token, i) {
    var title = queryTitle(A, state.kind, i);
    var g = svg("g", {
      class: "token query" + (isSpecial(token) ? " special" : "") +
             (i === state.query ? " selected" : ""),
      "data-side": "query", "data-index": i,
    }, svg("title", { text: title + " — click to see how its weights were computed" }),
       svg("rect", { class: "tok-bg", x: 4, y: rowY(i) - rowH / 2 + 2, width: leftW - 12,
                     height: rowH - 4, rx: 3 }),
       svg("text", { class: "token-label", x: x1 - 10, y: rowY(i), "text-anchor": "end",
                     text: shortLabel(qLabels[i], maxLabel) }));
    listen(g, highlight.bind(null, "query", i), selectQuery.bind(null, i));
    view.appendChild(g);
  });
  kTokens.forEach(function (token, j) {
    var g = svg("g", {
      class: "token key" + (isSpecial(token) ? " special" : ""), "data-side": "key", "data-index": j,
    }, svg("title", { text: "key " + j + ": " + token }),
       svg("rect", { class: "tok-bg", x: x2 + 4, y: rowY(j) - rowH / 2 + 2, width: rightW - 8,
                     height: rowH - 4, rx: 3 }),
       svg("text", { class: "token-label", x: x2 + 10, y: rowY(j), text: shortLabel(token, maxLabel) }),
       svg("text", { class: "weight-label", x: x2 + rightW + 4, y: rowY(j) }));
    listen(g, highlight.bind(null, "key", j), selectKey.bind(null, j));
    view.appendChild(g);
  });
}

function listen(g, onEnter, onSelect) {  // mouse, and keyboard (Tab, Enter)
  g.setAttribute("tabindex", "0");
  g.addEventListener("mouseenter", onEnter);
  g.addEventListener("mouseleave", unhighlight);
  g.addEventListener("focus", onEnter);
  g.addEventListener("blur", unhighlight);
  g.addEventListener("click", onSelect);
  g.addEventListener("keydown", function (event) {
    if (event.key === "Enter" || event.key === " ") {
      event.preventDefault();
      onSelect();
    }
  });
}

function meanWeight(series, i, j) {
  var sum = 0;
  series.forEach(function (s) { sum += (s.matrix[i] || [])[j] || 0; });
  return series.length ? sum / series.length : 0;
}

function highlight(side, index) {
  var drawn = state.headLines;
  if (!drawn) return;
  var view = $("head-view");
  unhighlight();
  view.classList.add("hovering");
  (side === "query" ? drawn.byQuery[index] : drawn.byKey[index]).forEach(function (line) {
    line.classList.add("active");
  });
  // Shade the tokens on the other side by the (mean shown) weight, and label it.
  var other = side === "query" ? "key" : "query";
  var tokens = view.querySelectorAll('.token[data-side="' + other + '"]');
  Array.prototype.forEach.call(tokens, function (g) {
    var k = Number(g.getAttribute("data-index"));
    var w = side === "query" ? meanWeight(drawn.series, index, k) : meanWeight(drawn.series, k, index);
    g.querySelector(".tok-bg").style.fillOpacity = w >= 0.0005 ? String(0.06 + 0.4 * Math.min(1, w)) : "0";
    var label = g.querySelector(".weight-label");
    if (label) label.textContent = w >= 0.0005 ? percent(w) : "";
  });
  var self = view.querySelector('.token[data-side="' + side + '"][data-index="' + index + '"] .tok-bg');
  if (self) self.style.fillOpacity = "0.15";
}

function unhighlight() {
  var view = $("head-view");
  view.classList.remove("hovering");
  Array.prototype.forEach.call(view.querySelectorAll("line.active"), function (line) {
    line.classList.remove("active");
  });
  Array.prototype.forEach.call(view.querySelectorAll(".tok-bg"), function (rect) {
    rect.style.fillOpacity = "";
  });
  Array.prototype.forEach.call(view.querySelectorAll(".weight-label"), function (label) {
    label.textContent = "";
  });
}

export function selectQuery(i) {
  state.query = i;
  state.key = null;
  var view = $("head-view");
  Array.prototype.forEach.call(view.querySelectorAll(".token.query"), function (g) {
    g.classList.toggle("selected", Number(g.getAttribute("data-index")) === i);
  });
  renderComputation();
}

function selectKey(j) {
  state.key = state.key === j ? null : j;
  renderComputation();
}

// -- model view ----------------------------------------------------------------------------

function drawHeatmap(canvas, weights, mask, Q, K) {
  canvas.width = Math.max(1, K);
  canvas.height = Math.max(1, Q);
  var context = canvas.getContext("2d");
  if (!context) return;
  var image = context.createImageData(canvas.width, canvas.height);
  for (var i = 0; i < Q; i++) {
    for (var j = 0; j < K; j++) {
      var allowed = !mask || !mask[i] || mask[i][j] !== false;
      var rgb = allowed ? sequentialRgb((weights[i] || [])[j]) : [226, 228, 232];
      var o = 4 * (i * K + j);
      image.data[o] = rgb[0];
      image.data[o + 1] = rgb[1];
      image.data[o + 2] = rgb[2];
      image.data[o + 3] = 255;
    }
  }
  context.putImageData(image, 0, 0);
}

export function renderModelView() {
  var root = clear($("model-view"));
  var A = attention(state.kind);
  if (!A) {
    root.appendChild(h("p", { class: "placeholder", text: "No attention weights to show." }));
    return;
  }
  var L = numLayers(A), N = numHeads(A);
  var Q = queryTokens(A).length, K = keyTokens(A).length;
  var cell = Math.max(34, Math.min(84, Math.floor(560 / N) - 6));
  var grid = h("div", {
    class: "mv-grid", "data-kind": state.kind,
    style: "grid-template-columns: auto repeat(" + N + ", " + cell + "px)",
  });
  grid.appendChild(h("div"));
  for (var n = 0; n < N; n++) {
    grid.appendChild(h("div", { class: "mv-col-label" },
      h("span", { class: "swatch", style: "background:" + headColor(n) }), "Head " + (n + 1)));
  }
  var shown = state.average ? null : state.heads;
  for (var l = 0; l < L; l++) {
    grid.appendChild(h("div", { class: "mv-row-label", text: "Layer " + (l + 1) }));
    for (n = 0; n < N; n++) {
      var selected = l === state.layer && (shown === null || shown.indexOf(n) >= 0);
      var canvas = h("canvas", { "aria-hidden": "true" });
      var button = h("button", {
        type: "button", class: "mv-cell" + (selected ? " selected" : ""), "data-layer": l,
        "data-head": n, title: KIND_LABELS[state.kind] + ", layer " + (l + 1) + ", head " + (n + 1) +
                               (state.kind === "encoder_self" ? "" : " (rows: reads → predicts)") +
                               " — click to show it in the head view",
        onclick: onModelCell.bind(null, l, n),
      }, canvas);
      drawHeatmap(canvas, matrix(A, l, n), A.mask, Q, K);
      grid.appendChild(button);
    }
  }
  root.appendChild(grid);
  var rowsText = state.kind === "encoder_self" ? "source tokens"
    : "target positions, each reading one token and predicting the next (" +
      queryLabel(A, state.kind, 0) + (Q > 1 ? ", " + queryLabel(A, state.kind, 1) + ", …" : "") + ")";
  root.appendChild(h("div", { class: "mv-legend" }, "weight 0", h("span", { class: "ramp" }), "1",
    h("span", { class: "muted", text: " · gray: masked (may not attend)" })));
  root.appendChild(h("p", { id: "model-view-rows", class: "explain mv-rows",
                            text: "Rows: " + rowsText + "; columns: " +
                                  (state.kind === "cross" ? "source tokens." :
                                   state.kind === "decoder_self" ? "the tokens read." : "source tokens.") }));
}

function onModelCell(layer, head) {
  state.layer = layer;
  state.heads = [head];
  state.average = false;
  state.compHead = head;
  actions.renderViews();
  var section = $("head-view-section");
  if (section && section.scrollIntoView) section.scrollIntoView({ behavior: "smooth", block: "start" });
}
