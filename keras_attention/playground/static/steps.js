/* keras_attention playground: step by step. At each target position the model's top-k next
 * tokens (POST api/alternatives for another temperature or k), the alternatives at one position,
 * and re-decoding the translation from a picked token (POST api/translate with target_prefix).
 */
import { $, ARROW, clear, fixed, h, isNum, isSpecial, onActivate, percent, postJson, sig } from "./shared.js";
import { actions, hasSteps, prefixLength, setStatus, state } from "./state.js";
import { renderTokens } from "./text.js";

// -- step by step: what else the model could have said -----------------------------------




function stepPercent(p) {  // small probabilities stay readable
  if (!isNum(p)) return "–";
  if (p > 0 && p < 0.001) return "<0.1%";
  return percent(p);
}

function stepTitle(token, p, logProb, temperature) {
  return token + ": P = " + sig(p, 4) + (isNum(temperature) && temperature !== 1 ? " at T = " + sig(temperature, 3) : "") +
         (isNum(logProb) ? " (log P = " + fixed(logProb, 3) + " at T = 1)" : "");
}

function ordinal(rank) { return "#" + rank; }

export function renderSteps(data) {
  // One column per target position: its top-k next tokens, most likely first, the token of the
  // translation highlighted (and listed below the top k, with its rank, when it is not in them).
  var table = clear($("steps-table"));
  var block = $("steps-block");
  var steps = hasSteps(data) ? data.steps : [];
  block.hidden = !steps.length;
  if (!steps.length) return;
  var inputs = Array.isArray(data.target_input_tokens) ? data.target_input_tokens : [];
  var fixedCount = prefixLength(data);
  var k = 0;
  steps.forEach(function (step) { k = Math.max(k, (step.alternatives || []).length); });
  var head = h("tr", null, h("th", { class: "row-label", scope: "col", text: "position" }));
  steps.forEach(function (step, t) {
    var rank = isNum(step.rank) ? step.rank : null;
    head.appendChild(h("th", {
      scope: "col", "data-position": t, tabindex: 0, role: "button",
      class: "step-head" + (t < fixedCount ? " fixed" : "") + (t === state.position ? " selected" : ""),
      title: "position " + t + ": reads " + (inputs[t] === undefined ? "?" : inputs[t]) + ", the translation has " +
             step.token + (rank !== null ? " (rank " + rank + ")" : "") + " — click: its alternatives",
      onclick: openAlternatives.bind(null, t), onkeydown: onActivate(openAlternatives.bind(null, t)),
    }, h("span", { class: "step-index", text: String(t) }),
       h("span", { class: "step-reads", text: inputs[t] === undefined ? "" : String(inputs[t]) + ARROW })));
  });
  var body = h("tbody");
  for (var i = 0; i < k; i++) {
    var row = h("tr", null, h("th", { class: "row-label", scope: "row", text: ordinal(i + 1) }));
    steps.forEach(function (step, t) {
      var alternative = (step.alternatives || [])[i];
      if (!alternative) {
        row.appendChild(h("td", { class: "step-cell empty" }));
        return;
      }
      var chosen = alternative.id === step.id;
      row.appendChild(h("td", {
        class: "step-cell" + (chosen ? " chosen" : "") + (isSpecial(alternative.token) ? " special" : ""),
        "data-position": t, "data-id": alternative.id, "data-probability": alternative.probability,
        title: stepTitle(String(alternative.token), alternative.probability, alternative.log_prob, data.temperature),
        style: "--p:" + Math.max(0, Math.min(1, alternative.probability || 0)).toFixed(4),
        onclick: openAlternatives.bind(null, t),
      }, h("span", { class: "step-token", text: String(alternative.token) }),
         h("span", { class: "step-prob", text: stepPercent(alternative.probability) })));
    });
    body.appendChild(row);
  }
  var outside = steps.some(function (step) { return isNum(step.rank) && step.rank > k; });
  if (outside) {  // the translation's tokens that are not in their position's top k
    var last = h("tr", { class: "outside-top-k" },
      h("th", { class: "row-label", scope: "row", title: "the translation's token, when it is not in the top k",
                text: "chosen" }));
    steps.forEach(function (step, t) {
      if (!(isNum(step.rank) && step.rank > k)) {
        last.appendChild(h("td", { class: "step-cell empty" }));
        return;
      }
      last.appendChild(h("td", {
        class: "step-cell chosen", "data-position": t, "data-id": step.id, "data-probability": step.probability,
        title: stepTitle(String(step.token), step.probability, step.log_prob, data.temperature),
        style: "--p:" + Math.max(0, Math.min(1, step.probability || 0)).toFixed(4),
        onclick: openAlternatives.bind(null, t),
      }, h("span", { class: "step-token", text: String(step.token) }),
         h("span", { class: "step-prob", text: stepPercent(step.probability) }),
         h("span", { class: "step-rank", text: "rank " + step.rank })));
    });
    body.appendChild(last);
  }
  table.appendChild(h("thead", null, head));
  table.appendChild(body);
  // Where the translation's token is not the most likely one, its rank, in the column head.
  steps.forEach(function (step, t) {
    if (isNum(step.rank) && step.rank > 1) {
      var cell = table.querySelector('th[data-position="' + t + '"]');
      cell.appendChild(h("span", { class: "step-rank", title: "the translation's token is the " + ordinal(step.rank) +
                                   " most likely here", text: "rank " + step.rank }));
    }
  });
  var temperature = $("steps-temperature");
  if (isNum(data.temperature) && document.activeElement !== temperature) {
    temperature.value = String(Math.max(0.1, Math.min(5, data.temperature)));
    $("steps-temperature-value").textContent = data.temperature.toFixed(2);
  }
  if (isNum(data.top_k) && document.activeElement !== $("top-k")) $("top-k").value = String(data.top_k);
}

export function openAlternatives(t) {
  state.position = t;
  renderTokens(state.data);
  renderSteps(state.data);
  renderAlternatives(state.data);
  var first = document.querySelector("#alternatives button.alternative:not([disabled])");
  if (first) first.focus({ preventScroll: true });
}

export function closeAlternatives() {
  state.position = null;
  renderTokens(state.data);
  renderSteps(state.data);
  renderAlternatives(state.data);
}

export function renderAlternatives(data) {
  // The alternatives at one position: pick one and the translation is re-decoded from the
  // tokens before it and the picked one.
  var root = clear($("alternatives"));
  var steps = hasSteps(data) ? data.steps : [];
  var t = state.position;
  var step = t === null ? null : steps[t];
  root.hidden = !step;
  if (!step) return;
  root.setAttribute("data-position", t);
  var inputs = Array.isArray(data.target_input_tokens) ? data.target_input_tokens : [];
  var ids = Array.isArray(data.target_ids) ? data.target_ids : [];
  var canPick = !state.staticMode && typeof data.source === "string" && ids.length === steps.length;
  root.appendChild(h("div", { class: "alternatives-head" },
    h("p", { class: "alternatives-title" },
      "Position " + t + ": after «" + (inputs[t] === undefined ? "?" : inputs[t]) + "» the translation has ",
      h("b", { text: String(step.token) }),
      " (" + stepPercent(step.probability) + (isNum(step.rank) ? ", rank " + step.rank : "") +
      "). What else the model could have said:"),
    h("button", { type: "button", class: "small-button close", "aria-label": "Close the alternatives",
                  title: "Close", onclick: closeAlternatives, text: "×" })));
  var list = h("div", { class: "alternative-list" });
  (step.alternatives || []).forEach(function (alternative, i) {
    var chosen = alternative.id === step.id;
    list.appendChild(h("button", {
      type: "button", class: "alternative" + (chosen ? " chosen" : "") + (isSpecial(alternative.token) ? " special" : ""),
      "data-id": alternative.id, "data-token": String(alternative.token), "data-probability": alternative.probability,
      disabled: !canPick || chosen,
      title: chosen ? "the token already here" : canPick ? "re-decode the rest of the translation after «" +
             alternative.token + "»" : stepTitle(String(alternative.token), alternative.probability,
                                                 alternative.log_prob, data.temperature),
      onclick: canPick && !chosen ? pickAlternative.bind(null, t, alternative.id) : null,
    }, h("span", { class: "alt-rank", text: ordinal(i + 1) }),
       h("span", { class: "alt-token", text: String(alternative.token) }),
       h("span", { class: "prob-bar" }, h("span", {
         style: "width:" + (100 * Math.max(0, Math.min(1, alternative.probability || 0))).toFixed(1) + "%",
       })),
       h("span", { class: "alt-prob", text: stepPercent(alternative.probability) })));
  });
  root.appendChild(list);
  root.appendChild(h("p", { class: "explain", text: canPick
    ? "Pick a token: the translation keeps its first " + t + " token" + (t === 1 ? "" : "s") +
      ", takes yours, and the search (beam size " + (data.beam_size === undefined ? "?" : data.beam_size) +
      ") decodes the rest; its score and attention replace the views below."
    : state.staticMode ? "Run the playground to re-decode the translation from another token." : "" }));
}

function pickAlternative(t, id) {
  var data = state.data;
  var prefix = data.target_ids.slice(0, t).concat([id]);
  if (state.original === null) state.original = data;
  var request = { text: data.source, target_prefix: prefix };
  if (isNum(data.beam_size)) request.beam_size = data.beam_size;
  stepOptions(request);
  state.position = null;
  return actions.postTranslate(request, "Re-decoding from your pick…");
}

function backToOriginal() {
  var original = state.original;
  if (!original) return;
  state.original = null;
  state.position = null;
  state.requestId++;  // an answer still on its way is no longer wanted
  actions.showResponse(original);
  setStatus("Back to the original translation.", "ok");
  if (original.temperature !== stepsTemperature() || original.top_k !== stepsTopK()) refreshSteps();
}

export function stepsTemperature() {
  var t = parseFloat($("steps-temperature").value);
  return isNum(t) && t > 0 ? t : 1;
}

function stepsTopK() {
  var k = Number($("top-k").value);
  var most = Number($("top-k").max) || 50;
  return Number.isInteger(k) && k >= 1 ? Math.min(k, most) : 5;
}

export function stepOptions(request) {  // the step-by-step table's settings, for a request
  request.top_k = stepsTopK();
  request.temperature = stepsTemperature();
  return request;
}

export function refreshSteps() {
  // The temperature or k changed: the same translation's steps again (no new search).
  var data = state.data;
  $("steps-temperature-value").textContent = stepsTemperature().toFixed(2);
  if (state.staticMode || !data || !Array.isArray(data.target_ids) || typeof data.source !== "string") {
    return Promise.resolve(null);
  }
  var id = ++state.stepsRequestId;
  var request = stepOptions({ text: data.source, target_ids: data.target_ids });
  return postJson("api/alternatives", request).then(function (answer) {
    if (id !== state.stepsRequestId || state.data !== data) return null;  // out of date
    data.steps = answer.steps;
    data.temperature = answer.temperature;
    data.top_k = answer.top_k;
    renderSteps(data);
    renderAlternatives(data);
    return answer;
  }, function (error) {
    if (id !== state.stepsRequestId) return null;
    setStatus("Error: " + error.message, "error");
    return null;
  });
}

actions.openAlternatives = openAlternatives;
actions.backToOriginal = backToOriginal;
