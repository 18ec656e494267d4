/* keras_attention playground: the page that shows a Transformer's attention.
 *
 * Plain JavaScript, no framework and nothing fetched from the network. The page talks to the
 * playground server's JSON API (GET api/info, POST api/translate, POST api/alternatives; see the
 * playground docs), or, in a static export, renders the response embedded in
 * <script id="playground-data">.
 *
 * Shape legend (as in the API): L layers, N heads, Q query tokens, K key tokens,
 * H key size (d_k), Hv value size. weights[l][h][i][j] is query i's weight for key j.
 *
 * Every piece of text from the data reaches the DOM through textContent or setAttribute, never
 * through innerHTML, so tokens such as "<b>" or "&amp;" are shown as they are.
 */
(function () {
  "use strict";

  var KIND_LABELS = {
    encoder_self: "Encoder self-attention",
    decoder_self: "Decoder self-attention (causal)",
    cross: "Cross-attention (target → source)",
  };
  // A decoder row (query) is a target position: it reads one token ([START] first) and predicts
  // the next; every view labels it "reads → predicts", as the PNG heatmaps do.
  var KIND_COLUMNS = {
    encoder_self: ["source (queries)", "source (keys)"],
    decoder_self: ["reads → predicts (queries)", "tokens read (keys)"],
    cross: ["reads → predicts (queries)", "source (keys)"],
  };
  var ARROW = " → ";
  // d3's category10: distinct on white, readable at low opacity.
  var PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                 "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
  var AVERAGE_COLOR = "#1b2a41";
  var MIN_LINE_WEIGHT = 0.002;  // lines lighter than this are invisible anyway
  var SVG_NS = "http://www.w3.org/2000/svg";
  var SANDBOX_DEFAULTS = [2.0, 1.0, 0.5, 0.0, -1.0];

  var state = {
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

  // -- small DOM helpers (text always via textContent / setAttribute) ------------------------

  function $(id) { return document.getElementById(id); }

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

  function h(tag, attrs) {
    var node = setAttrs(document.createElement(tag), attrs);
    return appendAll(node, Array.prototype.slice.call(arguments, 2));
  }

  function svg(tag, attrs) {
    var node = setAttrs(document.createElementNS(SVG_NS, tag), attrs);
    return appendAll(node, Array.prototype.slice.call(arguments, 2));
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
    return node;
  }

  // -- numbers and colors --------------------------------------------------------------------

  function isNum(x) { return typeof x === "number" && isFinite(x); }

  function minus(text) { return text.replace(/^-/, "−"); }

  function fixed(x, digits) {
    if (x === -Infinity) return "−∞";
    if (!isNum(x)) return "–";
    return minus(x.toFixed(digits));
  }

  function sig(x, digits) {
    if (!isNum(x)) return "–";
    return minus(Number(x.toPrecision(digits)).toString());
  }

  function sci(x) {
    if (!isNum(x)) return "–";
    if (x === 0) return "0";
    return minus(x.toExponential(1)).replace("e-", "e−").replace("e+", "e");
  }

  function percent(p) { return isNum(p) ? (100 * p).toFixed(1) + "%" : "–"; }

  function headColor(head) {
    if (head < PALETTE.length) return PALETTE[head];
    return "hsl(" + Math.round((head * 137.508) % 360) + ", 65%, 45%)";
  }

  function mix(a, b, t) {
    return [0, 1, 2].map(function (i) { return Math.round(a[i] + (b[i] - a[i]) * t); });
  }

  var BLUES = [[247, 251, 255], [107, 174, 214], [8, 48, 107]];

  function sequentialRgb(t) {  // t in [0, 1] -> white .. dark blue
    t = Math.max(0, Math.min(1, isNum(t) ? t : 0));
    return t < 0.5 ? mix(BLUES[0], BLUES[1], t * 2) : mix(BLUES[1], BLUES[2], t * 2 - 1);
  }

  function divergingColor(x, maxAbs) {  // blue (negative) .. white .. red (positive)
    var t = maxAbs > 0 && isNum(x) ? Math.max(-1, Math.min(1, x / maxAbs)) : 0;
    var rgb = t < 0 ? mix([247, 247, 247], [33, 102, 172], -t) : mix([247, 247, 247], [178, 24, 43], t);
    return "rgb(" + rgb.join(",") + ")";
  }

  function maxAbs(vectors) {
    var m = 0;
    vectors.forEach(function (v) {
      (v || []).forEach(function (x) { if (isNum(x) && Math.abs(x) > m) m = Math.abs(x); });
    });
    return m;
  }

  function isSpecial(token) { return /^\[[A-Z]+\]$/.test(String(token)); }

  // -- the data ------------------------------------------------------------------------------

  function attention(kind) {
    var data = state.data;
    var A = data && data.attention && data.attention[kind];
    if (!A || !Array.isArray(A.weights) || !A.weights.length || !Array.isArray(A.weights[0])) {
      return null;
    }
    return A;
  }

  function numLayers(A) { return A.weights.length; }
  function numHeads(A) { return A.weights[0].length; }
  function queryTokens(A) { return Array.isArray(A.query_tokens) ? A.query_tokens : []; }
  function keyTokens(A) { return Array.isArray(A.key_tokens) ? A.key_tokens : []; }

  function predictedToken(kind, i) {  // what decoder row i predicts (undefined for the encoder)
    var predicted = state.data && state.data.target_tokens;
    if (kind === "encoder_self" || !Array.isArray(predicted)) return undefined;
    return predicted[i];
  }

  function queryLabel(A, kind, i) {  // "reads → predicts" for a decoder row, else the token
    var token = String(queryTokens(A)[i]);
    var predicted = predictedToken(kind, i);
    return predicted === undefined ? token : token + ARROW + predicted;
  }

  function queryTitle(A, kind, i) {
    var predicted = predictedToken(kind, i);
    return predicted === undefined ? "query " + i + ": " + queryTokens(A)[i]
      : "query " + i + ": reads " + queryTokens(A)[i] + ", predicts " + predicted;
  }

  function matrix(A, layer, head) {  // [Q][K] weights of one head
    var m = A.weights[layer] && A.weights[layer][head];
    return Array.isArray(m) ? m : [];
  }

  function averageMatrix(A, layer) {
    return meanOverHeads(A.weights[layer] || [], queryTokens(A).length, keyTokens(A).length);
  }

  function meanOverHeads(heads, Q, K) {  // [N][Q][K] -> [Q][K]
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

  function shownSeries(A) {  // [{head, color, matrix}] drawn in the head view
    if (state.average) {
      return [{ head: "average", color: AVERAGE_COLOR, matrix: averageMatrix(A, state.layer) }];
    }
    return state.heads.map(function (head) {
      return { head: head, color: headColor(head), matrix: matrix(A, state.layer, head) };
    });
  }

  function clampState() {
    var A = attention(state.kind);
    if (!A) return;
    var L = numLayers(A), N = numHeads(A), Q = queryTokens(A).length;
    state.layer = Math.max(0, Math.min(state.layer, L - 1));
    state.heads = state.heads.filter(function (x) { return x < N; });
    state.compHead = Math.max(0, Math.min(state.compHead, N - 1));
    state.query = Math.max(0, Math.min(state.query, Math.max(0, Q - 1)));
    if (state.key !== null && state.key >= keyTokens(A).length) state.key = null;
  }

  // -- status line ---------------------------------------------------------------------------

  function setStatus(text, kind) {
    var node = $("status");
    node.textContent = text;
    node.className = "status" + (kind ? " " + kind : "");
  }

  // -- header and translations ---------------------------------------------------------------

  function renderModelSummary(model) {
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

  function renderTranslations(data) {
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
          type: "button", id: "back-to-original", class: "small-button", onclick: backToOriginal,
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

  function renderReliability(data) {
    // How far to trust the translation (the API's `reliability`): a warning when most source
    // words are out of vocabulary or the model is unsure, and the two numbers always.
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

  function renderTokens(data) {
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
        onclick: hasSteps(data) ? openAlternatives.bind(null, t) : null,
        onkeydown: hasSteps(data) ? onActivate(openAlternatives.bind(null, t)) : null,
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

  // -- step by step: what else the model could have said -----------------------------------

  function hasSteps(data) { return Array.isArray(data && data.steps) && data.steps.length > 0; }

  function prefixLength(data) {  // how many target tokens a re-decoded answer was given
    return data && data.mode === "prefix" && Array.isArray(data.target_prefix) ? data.target_prefix.length : 0;
  }

  function onActivate(action) {  // Enter or space on a focusable element = a click
    return function (event) {
      if (event.key === "Enter" || event.key === " ") {
        event.preventDefault();
        action();
      }
    };
  }

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

  function renderSteps(data) {
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

  function openAlternatives(t) {
    state.position = t;
    renderTokens(state.data);
    renderSteps(state.data);
    renderAlternatives(state.data);
    var first = document.querySelector("#alternatives button.alternative:not([disabled])");
    if (first) first.focus({ preventScroll: true });
  }

  function closeAlternatives() {
    state.position = null;
    renderTokens(state.data);
    renderSteps(state.data);
    renderAlternatives(state.data);
  }

  function renderAlternatives(data) {
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
    return postTranslate(request, "Re-decoding from your pick…");
  }

  function backToOriginal() {
    var original = state.original;
    if (!original) return;
    state.original = null;
    state.position = null;
    state.requestId++;  // an answer still on its way is no longer wanted
    showResponse(original);
    setStatus("Back to the original translation.", "ok");
    if (original.temperature !== stepsTemperature() || original.top_k !== stepsTopK()) refreshSteps();
  }

  function stepsTemperature() {
    var t = parseFloat($("steps-temperature").value);
    return isNum(t) && t > 0 ? t : 1;
  }

  function stepsTopK() {
    var k = Number($("top-k").value);
    var most = Number($("top-k").max) || 50;
    return Number.isInteger(k) && k >= 1 ? Math.min(k, most) : 5;
  }

  function stepOptions(request) {  // the step-by-step table's settings, for a request
    request.top_k = stepsTopK();
    request.temperature = stepsTemperature();
    return request;
  }

  function refreshSteps() {
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

  // -- head view controls --------------------------------------------------------------------

  function renderControls() {
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
    renderViews();
  }

  function onlyHead(n, event) {
    if (event) event.preventDefault();
    state.average = false;
    state.heads = [n];
    state.compHead = n;
    renderViews();
  }

  function allHeads() {
    var A = attention(state.kind);
    if (!A) return;
    state.average = false;
    state.heads = [];
    for (var n = 0; n < numHeads(A); n++) state.heads.push(n);
    renderViews();
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

  function renderHeadView() {
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

  function selectQuery(i) {
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

  function renderModelView() {
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
    renderViews();
    var section = $("head-view-section");
    if (section && section.scrollIntoView) section.scrollIntoView({ behavior: "smooth", block: "start" });
  }

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

  function softmax(logits) {
    var max = -Infinity;
    logits.forEach(function (x) { if (x > max) max = x; });
    if (max === -Infinity) return logits.map(function () { return 0; });
    var exps = logits.map(function (x) { return x === -Infinity ? 0 : Math.exp(x - max); });
    var sum = exps.reduce(function (a, b) { return a + b; }, 0);
    return exps.map(function (e) { return e / sum; });
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

  function renderComputation() {
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

  function initSandbox() {
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
    // The views in their own files (static/*.js after this one) render from this event's
    // detail.data, the API answer shown (and read state.data if they start later).
    document.dispatchEvent(new CustomEvent("playground:response", { detail: { data: data } }));
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

  function unpackArrays(value) {
    if (isPacked(value)) return unpackArray(value);
    if (Array.isArray(value)) return value.map(unpackArrays);
    if (value && typeof value === "object") {
      Object.keys(value).forEach(function (key) { value[key] = unpackArrays(value[key]); });
    }
    return value;
  }

  function fetchJson(url, options) {
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
  function postJson(url, body) {
    return fetchJson(url, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
  }

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

  // What the views in other files use: the state, the JSON helpers (a server's {"error": ...}
  // becomes an Error), the status line and the DOM helpers.
  window.playground = { state: state, translate: translate, render: renderViews,
                        alternatives: openAlternatives, refreshSteps: refreshSteps,
                        fetchJson: fetchJson, postJson: postJson, setStatus: setStatus,
                        h: h, svg: svg, clear: clear,
                        isNum: isNum, meanOverHeads: meanOverHeads,
                        sequentialColor: function (t) {  // t in [0, 1] -> white .. dark blue
                          return "rgb(" + sequentialRgb(t).join(",") + ")";
                        } };

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
