/* keras_attention playground: the page that shows a Transformer's attention (the entry module).
 *
 * Plain JavaScript modules, no framework and nothing fetched from the network. The page talks to
 * the playground server's JSON API (GET api/info, POST api/translate, ...; see the playground
 * docs), or, in a static export (one file: keras_attention/playground/bundle.py inlines these
 * modules), renders the response embedded in <script id="playground-data">.
 *
 * One module per view: text.js, steps.js, heads.js, numbers.js, beam_tree.js, attribution.js,
 * checkpoints.js; shared.js (DOM helpers, fetchJson, unpackArrays) and state.js under them all.
 * This one shows an answer (showResponse: every view renders it, and the views that ask the
 * server for more hear a "playground:response" event) and wires the form.
 */
import { $, clear, fetchJson, h, isNum, postJson, unpackArrays } from "./shared.js";
import {
  actions,
  attention,
  clampState,
  hasSteps,
  numHeads,
  numLayers,
  setStatus,
  state,
} from "./state.js";
import { renderModelSummary, renderReliability, renderTokens, renderTranslations } from "./text.js";
import {
  closeAlternatives,
  openAlternatives,
  refreshSteps,
  renderAlternatives,
  renderSteps,
  stepOptions,
  stepsTemperature,
} from "./steps.js";
import { initSandbox, renderComputation } from "./numbers.js";
import { allHeads, renderControls, renderHeadView, renderModelView, selectQuery } from "./heads.js";
import { startBeamTree } from "./beam_tree.js";
import { startAttributions } from "./attribution.js";
import { startCheckpoints } from "./checkpoints.js";

// -- rendering a response ------------------------------------------------------------------

function renderViews() {
  clampState();
  renderControls();
  renderHeadView();
  renderModelView();
  renderComputation();
  document.body.setAttribute("data-rendered", String(state.requestId));
  if (window.performance && performance.mark) performance.mark("playground-rendered");
}

function showResponse(data) {
  var first = state.data === null;
  state.data = data;
  renderModelSummary(data.model || (state.info && state.info.model));
  if (state.position !== null && !(hasSteps(data) && state.position < data.steps.length)) {
    state.position = null;
  }
  renderTranslations(data);
  renderReliability(data);
  renderTokens(data);
  renderSteps(data);
  renderAlternatives(data);
  var A = attention(state.kind);
  if (!A) {  // the selected kind is missing: pick one that exists
    ["cross", "encoder_self", "decoder_self"].some(function (kind) {
      if (attention(kind)) { state.kind = kind; return true; }
      return false;
    });
    A = attention(state.kind);
  }
  if (A && (first || !state.heads.length && !state.average)) {
    // Start with the average over heads: all heads' lines at once are a hairball
    // ("All heads" or a head's box shows them).
    state.average = true;
    state.heads = [];
    for (var n = 0; n < numHeads(A); n++) state.heads.push(n);
    state.compHead = 0;
  }
  // Start at the last layer: in a trained model its cross-attention is the
  // clearest alignment of each target word with the source word it translates.
  if (A && first) state.layer = numLayers(A) - 1;
  state.query = 0;
  state.key = null;
  renderViews();
  // The views that ask the server for more (beam_tree.js, attribution.js, checkpoints.js) render
  // from this event's detail.data, the API answer shown (and read state.data if they start later).
  document.dispatchEvent(new CustomEvent("playground:response", { detail: { data: data } }));
}

// -- talking to the server -----------------------------------------------------------------

function loadInfo() {
  setStatus("Loading the model…", "busy");
  return fetchJson("api/info").then(function (info) {
    state.info = info;
    renderModelSummary(info.model);
    var beam = $("beam-size");
    if (isNum(info.max_beam_size)) beam.max = String(info.max_beam_size);
    if (isNum(info.beam_size)) beam.value = String(info.beam_size);
    if (isNum(info.max_top_k)) $("top-k").max = String(info.max_top_k);
    if (isNum(info.top_k)) $("top-k").value = String(info.top_k);
    if (isNum(info.max_text_length)) {
      $("text").maxLength = info.max_text_length;
      $("target").maxLength = info.max_text_length;
    }
    var text = $("text");
    if (!text.value && typeof info.example === "string") text.value = info.example;
    renderExamples(Array.isArray(info.examples) ? info.examples : []);
    setStatus("Ready. Type a sentence and press Enter.");
    return info;
  }, function (error) {
    setStatus("Error: could not load api/info: " + error.message, "error");
    throw error;
  });
}

// A few sentences to try, one click each (the server picks them for the
// model's source language).
function renderExamples(examples) {
  var box = clear($("examples"));
  var shown = examples.filter(function (e) { return typeof e === "string" && e; });
  box.hidden = !shown.length;
  if (!shown.length) return;
  box.appendChild(h("span", { class: "muted", text: "Try: " }));
  shown.forEach(function (example) {
    var button = h("button", { type: "button", class: "example", text: example });
    button.addEventListener("click", function () {
      $("text").value = example;
      $("target").value = "";
      translate();
    });
    box.appendChild(button);
  });
}

function translate() {
  var text = $("text").value;
  var target = $("target").value;
  var beamText = $("beam-size").value.trim();
  var request = { text: text };
  if (beamText !== "") {
    var beam = Number(beamText);
    var maxBeam = Number($("beam-size").max) || 16;
    if (!Number.isInteger(beam) || beam < 1 || beam > maxBeam) {
      setStatus("Error: the beam size must be a whole number from 1 to " + maxBeam + "; got " +
                JSON.stringify(beamText) + ".", "error");
      return Promise.resolve(null);
    }
    request.beam_size = beam;
  }
  if (target.trim()) request.target = target;
  stepOptions(request);
  state.original = null;
  state.position = null;
  return postTranslate(request, target.trim() ? "Scoring your translation…" : "Translating…");
}

function postTranslate(request, busy) {
  var id = ++state.requestId;
  var started = performance.now();
  setStatus(busy, "busy");
  return postJson("api/translate", request).then(function (data) {
    if (id !== state.requestId) return null;  // a newer request was sent meanwhile
    var roundTrip = performance.now() - started;
    showResponse(data);
    var done = data.mode === "forced" ? "Scored your translation"
      : data.mode === "prefix" ? "Re-decoded from your pick" : "Translated";
    if (isNum(data.milliseconds)) done += " in " + data.milliseconds.toFixed(0) + " ms on the server";
    setStatus(done + " · " + roundTrip.toFixed(0) + " ms round trip.", "ok");
    return data;
  }, function (error) {
    if (id !== state.requestId) return null;
    setStatus(error.fromServer ? "Error: " + error.message
                               : "Error: could not reach the playground server (" + error.message + ").",
              "error");
    return null;
  });
}

// -- start ---------------------------------------------------------------------------------

function wireControls() {
  $("translate-form").addEventListener("submit", function (event) {
    event.preventDefault();
    if (!state.staticMode) translate();
  });
  $("kind").addEventListener("change", function () {
    state.kind = $("kind").value;
    state.query = 0;
    state.key = null;
    renderViews();
  });
  $("layer").addEventListener("change", function () {
    state.layer = Number($("layer").value);
    renderViews();
  });
  $("heads-all").addEventListener("click", allHeads);
  $("comp-query").addEventListener("change", function () { selectQuery(Number($("comp-query").value)); });
  $("comp-layer").addEventListener("change", function () {
    state.layer = Number($("comp-layer").value);
    renderViews();
  });
  $("comp-head").addEventListener("change", function () {
    state.compHead = Number($("comp-head").value);
    renderComputation();
  });
  var stepsTimer = null;
  function stepsChanged() {  // one request once the slider rests a moment
    $("steps-temperature-value").textContent = stepsTemperature().toFixed(2);
    clearTimeout(stepsTimer);
    stepsTimer = setTimeout(refreshSteps, 150);
  }
  $("steps-temperature").addEventListener("input", stepsChanged);
  $("top-k").addEventListener("change", stepsChanged);
  document.addEventListener("keydown", function (event) {
    if (event.key === "Escape" && state.position !== null) closeAlternatives();
  });
}

function start() {
  wireControls();
  // The views that ask the server for more listen for "playground:response" from here on.
  startBeamTree();
  startAttributions();
  startCheckpoints();
  var resizeTimer = null;
  window.addEventListener("resize", function () {  // the head view fits its card's width
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(function () { if (state.data) renderHeadView(); }, 150);
  });
  initSandbox();
  var embedded = $("playground-data");
  if (embedded) {
    state.staticMode = true;
    $("static-note").hidden = false;
    var form = $("translate-form");
    form.hidden = true;
    Array.prototype.forEach.call(form.querySelectorAll("input, button"), function (input) {
      input.disabled = true;
    });
    // No server to ask for another temperature or k: the export's own are shown.
    $("steps-temperature").disabled = true;
    $("top-k").disabled = true;
    var data;
    try {
      data = unpackArrays(JSON.parse(embedded.textContent));
    } catch (error) {
      setStatus("Error: the embedded data is not valid JSON (" + error.message + ").", "error");
      return;
    }
    if (data && typeof data.source === "string") $("text").value = data.source;
    showResponse(data || {});
    setStatus("");
    return;
  }
  renderViews();
  loadInfo().then(function () {
    if ($("text").value.trim()) translate();  // show the example at once
  }, function () { /* the status line says why */ });
}

actions.showResponse = showResponse;
actions.postTranslate = postTranslate;
actions.renderViews = renderViews;

// For the browser tests and tools/playground_screenshots.py (the modules import what they use).
window.playground = { state: state, translate: translate, render: renderViews,
                      alternatives: openAlternatives, refreshSteps: refreshSteps };

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
else start();
