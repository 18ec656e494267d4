/* keras_attention playground: the page's state (the API answer shown and what the views
 * selected in it), the accessors of its attention, the status line, and `actions`: what one view
 * asks of another that it does not import (the import graph has no cycle: playground.js, the
 * entry, registers showResponse, postTranslate and renderViews; steps.js its own).
 *
 * Shape legend (as in the API): L layers, N heads, Q query tokens, K key tokens,
 * H key size (d_k), Hv value size. weights[l][h][i][j] is query i's weight for key j.
 */
import { $, ARROW } from "./shared.js";

// What a view calls in another that it does not import (filled as the modules load): steps.js's
// openAlternatives and backToOriginal, playground.js's showResponse, postTranslate, renderViews.
export const actions = {};

// d3's category10: distinct on white, readable at low opacity.
var PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
               "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
export const AVERAGE_COLOR = "#1b2a41";
export const KIND_LABELS = {
  encoder_self: "Encoder self-attention",
  decoder_self: "Decoder self-attention (causal)",
  cross: "Cross-attention (target → source)",
};
// A decoder row (query) is a target position: it reads one token ([START] first) and predicts
// the next; every view labels it "reads → predicts", as the PNG heatmaps do.
export const KIND_COLUMNS = {
  encoder_self: ["source (queries)", "source (keys)"],
  decoder_self: ["reads → predicts (queries)", "tokens read (keys)"],
  cross: ["reads → predicts (queries)", "source (keys)"],
};

export const state = {
  data: null,          // the API response shown
  info: null,          // GET api/info
  staticMode: false,
  kind: "cross",
  layer: 0,
  heads: [],           // head indices shown in the head view
  average: false,      // show the mean of all heads instead
  query: 0,            // the query of the computation view
  compHead: 0,         // the head of the computation view
  key: null,           // a key highlighted in the computation table
  requestId: 0,
  headLines: null,     // {byQuery: [[line]], byKey: [[line]]} of the drawn head view
  original: null,      // the answer a re-decoded one started from ("back to the original")
  position: null,      // the target position whose alternatives are open
  stepsRequestId: 0,   // the latest api/alternatives request (temperature, top k)
};

export function headColor(head) {
  if (head < PALETTE.length) return PALETTE[head];
  return "hsl(" + Math.round((head * 137.508) % 360) + ", 65%, 45%)";
}

// -- the data ------------------------------------------------------------------------------

export function attention(kind) {
  var data = state.data;
  var A = data && data.attention && data.attention[kind];
  if (!A || !Array.isArray(A.weights) || !A.weights.length || !Array.isArray(A.weights[0])) {
    return null;
  }
  return A;
}

export function numLayers(A) { return A.weights.length; }
export function numHeads(A) { return A.weights[0].length; }
export function queryTokens(A) { return Array.isArray(A.query_tokens) ? A.query_tokens : []; }
export function keyTokens(A) { return Array.isArray(A.key_tokens) ? A.key_tokens : []; }

export function predictedToken(kind, i) {  // what decoder row i predicts (undefined for the encoder)
  var predicted = state.data && state.data.target_tokens;
  if (kind === "encoder_self" || !Array.isArray(predicted)) return undefined;
  return predicted[i];
}

export function queryLabel(A, kind, i) {  // "reads → predicts" for a decoder row, else the token
  var token = String(queryTokens(A)[i]);
  var predicted = predictedToken(kind, i);
  return predicted === undefined ? token : token + ARROW + predicted;
}

export function queryTitle(A, kind, i) {
  var predicted = predictedToken(kind, i);
  return predicted === undefined ? "query " + i + ": " + queryTokens(A)[i]
    : "query " + i + ": reads " + queryTokens(A)[i] + ", predicts " + predicted;
}

export function matrix(A, layer, head) {  // [Q][K] weights of one head
  var m = A.weights[layer] && A.weights[layer][head];
  return Array.isArray(m) ? m : [];
}

function averageMatrix(A, layer) {
  return meanOverHeads(A.weights[layer] || [], queryTokens(A).length, keyTokens(A).length);
}

export function meanOverHeads(heads, Q, K) {  // [N][Q][K] -> [Q][K]
  var out = [];
  for (var i = 0; i < Q; i++) {
    var row = [];
    for (var j = 0; j < K; j++) {
      var sum = 0;
      for (var n = 0; n < heads.length; n++) sum += (heads[n][i] || [])[j] || 0;
      row.push(heads.length ? sum / heads.length : 0);
    }
    out.push(row);
  }
  return out;
}

export function shownSeries(A) {  // [{head, color, matrix}] drawn in the head view
  if (state.average) {
    return [{ head: "average", color: AVERAGE_COLOR, matrix: averageMatrix(A, state.layer) }];
  }
  return state.heads.map(function (head) {
    return { head: head, color: headColor(head), matrix: matrix(A, state.layer, head) };
  });
}

export function clampState() {
  var A = attention(state.kind);
  if (!A) return;
  var L = numLayers(A), N = numHeads(A), Q = queryTokens(A).length;
  state.layer = Math.max(0, Math.min(state.layer, L - 1));
  state.heads = state.heads.filter(function (x) { return x < N; });
  state.compHead = Math.max(0, Math.min(state.compHead, N - 1));
  state.query = Math.max(0, Math.min(state.query, Math.max(0, Q - 1)));
  if (state.key !== null && state.key >= keyTokens(A).length) state.key = null;
}

export function hasSteps(data) { return Array.isArray(data && data.steps) && data.steps.length > 0; }

export function prefixLength(data) {  // how many target tokens a re-decoded answer was given
  return data && data.mode === "prefix" && Array.isArray(data.target_prefix) ? data.target_prefix.length : 0;
}

// -- status line ---------------------------------------------------------------------------

export function setStatus(text, kind) {
  var node = $("status");
  node.textContent = text;
  node.className = "status" + (kind ? " " + kind : "");
}
