/* keras_attention playground: the text views. The model summary in the header, the n-best
 * translations, how far to trust them (reliability), and the source and target tokens with each
 * target token's probability (a click opens its alternatives, steps.js).
 */
import { $, ARROW, clear, fixed, h, isNum, isSpecial, mix, onActivate, percent } from "./shared.js";
import { actions, hasSteps, prefixLength, state } from "./state.js";

// -- header and translations ---------------------------------------------------------------

export function renderModelSummary(model) {
  var node = $("model-summary");
  if (!model || typeof model !== "object") {
    node.textContent = "";
    return;
  }
  var parts = [];
  if (model.name) parts.push(String(model.name));
  if (isNum(model.parameters)) {
    parts.push((model.parameters >= 1e6 ? (model.parameters / 1e6).toFixed(1) + "M"
                : model.parameters >= 1e3 ? (model.parameters / 1e3).toFixed(0) + "k"
                : String(model.parameters)) + " parameters");
  }
  if (isNum(model.num_encoder_layers)) parts.push(model.num_encoder_layers + " encoder layers");
  if (isNum(model.num_decoder_layers)) parts.push(model.num_decoder_layers + " decoder layers");
  if (isNum(model.num_heads)) parts.push(model.num_heads + " heads");
  if (isNum(model.d_model)) parts.push("d_model " + model.d_model);
  if (isNum(model.key_dim)) parts.push("d_k " + model.key_dim);
  if (isNum(model.value_dim)) parts.push("d_v " + model.value_dim);
  if (isNum(model.max_length)) parts.push("max length " + model.max_length);
  // Its quality, from its metadata (GET api/info's `scores`): the test set's
  // name and the published model's figure are in the tooltip and the text.
  var scores = (state.info && state.info.scores) || {};
  var titles = [];
  if (scores.test && isNum(scores.test.bleu)) {
    parts.push("test BLEU " + scores.test.bleu.toFixed(1));
    titles.push("Test BLEU " + scores.test.bleu + " on " + scores.test.test_set);
  }
  var pub = scores.public_test;
  if (pub && isNum(pub.bleu)) {
    var published = pub.published && isNum(pub.published.bleu)
      ? " (" + pub.published.model + ": " + pub.published.bleu + ")" : "";
    parts.push("public test BLEU " + pub.bleu.toFixed(1) + published);
    titles.push("BLEU " + pub.bleu + " on " + pub.test_set + published);
  }
  node.textContent = parts.join(" · ");
  node.title = titles.join("\n");
}

export function renderTranslations(data) {
  var root = clear($("translations"));
  root.setAttribute("data-source", String(data.source === undefined ? "" : data.source));
  root.setAttribute("data-mode", String(data.mode || ""));
  var list = Array.isArray(data.translations) ? data.translations : [];
  if (!list.length) {
    root.appendChild(h("p", { class: "placeholder", text: "The model returned no translation." }));
    return;
  }
  if (data.mode === "forced") {
    root.appendChild(h("p", {
      class: "mode-note",
      text: "Your own translation, scored by the model (teacher-forced): the probabilities below " +
            "are what the model gave each of your tokens.",
    }));
  } else if (data.mode === "prefix") {
    var fixedTokens = (Array.isArray(data.target_tokens) ? data.target_tokens : [])
      .slice(0, prefixLength(data));
    root.appendChild(h("p", { class: "mode-note" },
      "Re-decoded from your pick: the first " + fixedTokens.length + " token" +
      (fixedTokens.length === 1 ? "" : "s") + " (" + fixedTokens.join(" ") + ") " +
      (fixedTokens.length === 1 ? "is" : "are") + " fixed, and beam " +
      "search (beam size " + (data.beam_size === undefined ? "?" : data.beam_size) + ") continues " +
      "from there. The views below show this translation. ",
      state.original && state.original !== data ? h("button", {
        type: "button", id: "back-to-original", class: "small-button", onclick: actions.backToOriginal,
        text: "↩ Back to the original translation",
      }) : null));
  } else {
    var penalty = data.length_penalty_form === "power" ? "|Y|^α" : "((5 + |Y|) / 6)^α";
    root.appendChild(h("p", {
      class: "mode-note",
      text: "Beam search with beam size " + (data.beam_size === undefined ? "?" : data.beam_size) +
            ": the n-best list, best first. Score = log P(Y|X) / " + penalty +
            (data.length_penalty === undefined ? "" : ", α = " + data.length_penalty) + ".",
    }));
  }
  var ol = h("ol");
  list.forEach(function (item, rank) {
    item = item || {};
    ol.appendChild(h("li", { "data-rank": rank },
      h("span", { class: "rank", text: rank + 1 + "." }),
      h("span", { class: "hyp-text", text: item.text === undefined ? "" : String(item.text) }),
      h("span", { class: "score", title: "log-probability with the GNMT length penalty",
                  text: "score " + fixed(item.score, 3) })));
  });
  root.appendChild(ol);
}

export function renderReliability(data) {
  // How far to trust the translation (the API's `reliability`): the warnings of the model's
  // calibrated rule (words out of vocabulary, unsure, a long source), and the two numbers always.
  var root = clear($("reliability"));
  var warnings = Array.isArray(data.warnings) ? data.warnings : [];
  warnings.forEach(function (warning) {
    warning = warning || {};
    root.appendChild(h("p", { class: "warning", "data-kind": String(warning.kind || ""),
                              text: "⚠ " + String(warning.message || "") }));
  });
  var oov = data.out_of_vocabulary;
  var parts = [];
  if (isNum(data.confidence)) {
    parts.push("confidence " + percent(data.confidence) + " (the translation's mean token probability)");
  }
  if (oov && isNum(oov.words)) {
    var unknown = Array.isArray(oov.unknown) ? oov.unknown : [];
    parts.push(unknown.length + " of " + oov.words + " source words out of vocabulary" +
               (unknown.length ? " (" + unknown.slice(0, 6).join(", ") + (unknown.length > 6 ? ", …" : "") + ")" : ""));
  }
  if (parts.length) root.appendChild(h("p", { class: "muted reliability-numbers", text: parts.join(" · ") }));
  root.hidden = !root.firstChild;
}

function probabilityColor(p) {  // red (unlikely) .. amber .. green (likely)
  var t = Math.max(0, Math.min(1, isNum(p) ? p : 0));
  var rgb = t < 0.5 ? mix([211, 58, 58], [230, 160, 30], t * 2) : mix([230, 160, 30], [46, 139, 87], t * 2 - 1);
  return "rgb(" + rgb.join(",") + ")";
}

export function renderTokens(data) {
  var source = clear($("source-tokens"));
  (Array.isArray(data.source_tokens) ? data.source_tokens : []).forEach(function (token, i) {
    source.appendChild(h("span", {
      class: "token" + (isSpecial(token) ? " special" : ""), "data-index": i,
      title: "source token " + i, text: String(token),
    }));
  });
  var target = clear($("target-tokens"));
  var tokens = Array.isArray(data.target_tokens) ? data.target_tokens : [];
  var inputs = Array.isArray(data.target_input_tokens) ? data.target_input_tokens : [];
  var probs = Array.isArray(data.token_probabilities) ? data.token_probabilities : [];
  tokens.forEach(function (token, t) {
    var p = probs[t];
    var title = (inputs[t] !== undefined ? "reads " + inputs[t] + ARROW + "predicts " + token + ": " : "") +
                "P(" + token + " | " + (inputs.length ? "the tokens before" : "context") +
                ", source) = " + percent(p);
    var chip = h("span", {
      class: "token target-token" + (isSpecial(token) ? " special" : "") +
             (t < prefixLength(data) ? " fixed" : "") + (t === state.position ? " selected" : ""),
      "data-index": t, "data-probability": isNum(p) ? p : "",
      title: title + (hasSteps(data) ? " — click: what else it could have said here" : ""),
      role: hasSteps(data) ? "button" : null, tabindex: hasSteps(data) ? 0 : null,
      onclick: hasSteps(data) ? actions.openAlternatives.bind(null, t) : null,
      onkeydown: hasSteps(data) ? onActivate(actions.openAlternatives.bind(null, t)) : null,
    }, h("span", { class: "tok-text", text: String(token) }));
    if (isNum(p)) {
      var bar = h("span", { class: "prob-bar" }, h("span", {
        style: "width:" + (100 * Math.max(0, Math.min(1, p))).toFixed(1) + "%;background:" +
               probabilityColor(p),
      }));
      chip.appendChild(bar);
      chip.appendChild(h("span", { class: "prob", text: percent(p) }));
    }
    target.appendChild(chip);
  });
}
