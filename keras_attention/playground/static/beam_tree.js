/* keras_attention playground: "Beam search, step by step", the search as a tree.
 *
 * POST api/beam_tree runs the translator's own search on the sentence shown, with the page's
 * beam size, and answers every step's candidates (the 2K best extensions of the K live
 * hypotheses): which it kept, which finished (ended with [END] among the K best finished) and
 * which it pruned, with log P and the score each would get if it ended there. Drawn as an SVG:
 * one column per step, an edge from each candidate to the hypothesis it extends, the path of the
 * translation the search returned highlighted.
 *
 * A JavaScript module, nothing from the network; text reaches the DOM only through textContent or
 * setAttribute (shared.js's h and svg).
 */
import { $, clear, isNum, postJson, svg } from "./shared.js";
import { state } from "./state.js";

var COLUMN = 118;      // px between steps
var NODE_W = 92;       // a kept or finished node's width
var PRUNED_W = 74;
var LEFT = 12;
var TOP = 26;          // room for the step numbers
var MAX_LABEL = 9;     // characters of a token shown in its node (the tooltip has all)

var view = { requestId: 0, key: null };


function number(x, digits) {
  return isNum(x) ? x.toFixed(digits).replace(/^-/, "\u2212") : "\u2013";
}

function short(token) {
  token = String(token);
  return token.length > MAX_LABEL ? token.slice(0, MAX_LABEL - 1) + "\u2026" : token;
}

function setNote(text, kind) {
  var note = $("beam-tree-status");
  note.textContent = text || "";
  note.className = "status" + (kind ? " " + kind : "");
}

function showNothing(text) {
  clear($("beam-tree"));
  $("beam-tree").setAttribute("width", "0");
  $("beam-tree").setAttribute("height", "0");
  $("beam-tree-summary").textContent = "";
  setNote(text);
}

// -- asking the server ---------------------------------------------------------------------

function request(data) {
  if (!data || typeof data.source !== "string") return;
  if (state.staticMode) {
    showNothing("The beam tree runs the search again: it needs the live playground server " +
                "(python recipes/translation/playground.py), not this exported page.");
    return;
  }
  if (data.mode === "forced") {
    showNothing("This answer scores a translation you gave; the beam tree shows the search's " +
                "own. Clear the translation field to see it.");
    view.key = null;
    return;
  }
  var body = { text: data.source };
  if (isNum(data.beam_size)) body.beam_size = data.beam_size;
  var key = JSON.stringify(body);
  if (key === view.key) return;  // already shown (or asked for)
  view.key = key;
  var id = ++view.requestId;
  setNote("Running the beam search step by step\u2026", "busy");
  postJson("api/beam_tree", body).then(function (tree) {
    if (id !== view.requestId) return;  // a newer sentence was asked for
    render(tree, data.mode === "prefix");
  }, function (error) {
    if (id !== view.requestId) return;
    view.key = null;
    showNothing("");
    setNote("Error: " + error.message, "error");
  });
}

// -- drawing -------------------------------------------------------------------------------

function render(tree, prefixMode) {
  var steps = Array.isArray(tree.steps) ? tree.steps : [];
  if (!steps.length) {
    showNothing("An empty sentence has no search: its translation is empty.");
    return;
  }
  var best = Array.isArray(tree.best_path) ? tree.best_path : [];
  var rows = steps.reduce(function (m, s) { return Math.max(m, s.length); }, 1);
  var rowH = rows <= 8 ? 32 : 24;
  var nodeH = rowH - 10;
  var width = LEFT + (steps.length + 1) * COLUMN;
  var height = TOP + rows * rowH + 8;
  var S = svg;
  var root = clear($("beam-tree"));
  root.setAttribute("width", String(width));
  root.setAttribute("height", String(height));
  root.setAttribute("viewBox", "0 0 " + width + " " + height);
  var edges = S("g", { class: "beam-edges" });
  var nodes = S("g", { class: "beam-nodes" });
  root.appendChild(edges);
  root.appendChild(nodes);

  function x(t) { return LEFT + (t + 1) * COLUMN; }  // column 0: [START]
  function y(i) { return TOP + i * rowH + rowH / 2; }

  // The start: every step-0 candidate extends it.
  nodes.appendChild(S("g", { class: "beam-node beam-start", "data-step": -1 },
    S("rect", { x: LEFT, y: y(0) - nodeH / 2, width: NODE_W - 20, height: nodeH, rx: 4 }),
    S("text", { x: LEFT + (NODE_W - 20) / 2, y: y(0) + 4, "text-anchor": "middle",
                text: "[START]" })));
  var previous = [{ x: LEFT + NODE_W - 20, y: y(0), onBest: true }];  // kept nodes of t - 1
  steps.forEach(function (step, t) {
    nodes.appendChild(S("text", { class: "beam-step-label", x: x(t) + NODE_W / 2, y: 14,
                                  "text-anchor": "middle", text: "step " + (t + 1) }));
    var kept = [];
    step.forEach(function (c, i) {
      var onBest = best[t] === i;
      var pruned = c.status === "pruned";
      var w = pruned ? PRUNED_W : NODE_W;
      var h = pruned ? nodeH - 6 : nodeH;
      var cy = y(i);
      var parent = previous[t === 0 ? 0 : c.parent];
      if (parent) {
        var x0 = parent.x, x1 = x(t), mid = (x0 + x1) / 2;
        edges.appendChild(S("path", {
          class: "beam-edge beam-" + c.status + (onBest && parent.onBest ? " beam-best" : ""),
          d: "M" + x0 + "," + parent.y + " C" + mid + "," + parent.y + " " + mid + "," + cy +
             " " + x1 + "," + cy,
        }));
      }
      var label = c.status === "finished" ? short(c.token) + " " + number(c.score, 2)
                                            : short(c.token);
      var node = S("g", {
        class: "beam-node beam-" + c.status + (onBest ? " beam-best" : ""),
        "data-step": t, "data-index": i, "data-id": c.id, "data-token": c.token,
        "data-status": c.status, "data-log-prob": c.log_prob, "data-score": c.score,
        "data-parent": c.parent === null ? "" : c.parent, "data-best": onBest ? "true" : "false",
      },
        S("title", { text: "step " + (t + 1) + ": \u201c" + c.token + "\u201d (id " + c.id +
                            "), " + c.status + "\nlog P = " + number(c.log_prob, 4) +
                            "\nscore if it ends here = " + number(c.score, 4) }),
        S("rect", { x: x(t), y: cy - h / 2, width: w, height: h,
                    rx: c.status === "finished" ? h / 2 : 4 }),
        S("text", { x: x(t) + w / 2, y: cy + 4, "text-anchor": "middle", text: label }));
      nodes.appendChild(node);
      if (c.status === "kept") kept.push({ x: x(t) + w, y: cy, onBest: onBest });
    });
    previous = kept;
  });
  $("beam-tree-summary").textContent = "Beam size " + tree.beam_size + ", " + steps.length +
    " step" + (steps.length === 1 ? "" : "s") + "; the search returned \u201c" +
    tree.translation + "\u201d (score " + number(tree.score, 3) + ")" +
    (prefixMode ? ", without the picked prefix." : ".");
  setNote("");
}

// -- start ---------------------------------------------------------------------------------

export function startBeamTree() {
  document.addEventListener("playground:response", function (event) {
    request(event.detail && event.detail.data);
  });
  if (state.data) request(state.data);  // the page may have answered already
}
