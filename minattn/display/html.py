"""Attention as one self-contained HTML page: a head view and a matrix view, drawn by a few
lines of inline JavaScript written here. No network, no CDN, no require.js: the page works
opened from disk, in Jupyter (AttentionView's _repr_html_), and in a slide (an iframe).

    head view    tokens on two sides (left: queries, right: keys), a line per (query, key, head)
                 whose opacity is the weight, a colour per head (12 distinct colours, then
                 again); hover a token to isolate it; choose the layer and the heads; with
                 grouped-query attention (group_size > 1) a button per KV group selects the
                 query heads that share its keys and values, drawn together; a long text
                 scrolls inside its box
    matrix view  one head's weights as coloured cells (viridis, colour-blind safe), the value
                 on hover; "PNG" and "SVG" buttons save it

Weights travel as integers in thousandths (0..1000), so a page stays small: at most MAX_TOKENS
tokens and MAX_VALUES weights in all, refused with a message naming the limit beyond that.
"""
import html
import json
import uuid

import numpy

MAX_TOKENS = 128
MAX_VALUES = 1_500_000  # layers x heads x L x L; about 4 MB of page

_CSS = """
.minattn-view{font:13px sans-serif;color:#222;background:#fff;padding:6px;display:inline-block}
.minattn-view .controls{margin:4px 0}
.minattn-view .controls label{margin-right:8px;cursor:pointer}
.minattn-view .swatch{display:inline-block;width:10px;height:10px;margin-right:3px}
.minattn-view svg text{font:12px monospace;cursor:default}
.minattn-view .errors{color:#b00;white-space:pre-wrap}
.minattn-view .tip{min-height:1.3em;font-family:monospace}
.minattn-view .scroll{max-height:640px;max-width:900px;overflow:auto;border:1px solid #ddd}
.minattn-view button.group{margin-right:4px}
"""

# Everything the page does, in one function: minattnView(root element, data).
_JS = r"""
function minattnView(root, data) {
  var SVG = "http://www.w3.org/2000/svg";
  // Okabe-Ito's eight (distinguishable with colour blindness), then four of Paul Tol's: twelve
  // heads (SmolLM2 has 9, BERT-base 12) each get their own colour.
  var PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00",
                 "#F0E442", "#000000", "#882255", "#999933", "#AA4499", "#44AA99"];
  var VIRIDIS = [[68,1,84],[59,82,139],[33,145,140],[94,201,98],[253,231,37]];
  var q = function (sel) { return root.querySelector(sel); };
  var tokens = data.tokens, n = tokens.length, nHeads = data.weights[0].length;
  var state = {layer: data.start[0], heads: [], head: data.start[1], focus: null};
  var group = data.group_size;  // query heads per KV head (1: no grouping)
  function inGroup(h, g) { return Math.floor(h / group) === g; }
  for (var h = 0; h < nHeads; h++)
    state.heads.push(group > 1 ? inGroup(h, Math.floor(state.head / group)) : h < 4 || h === state.head);
  function w(layer, head, i, j) { return data.weights[layer][head][i * n + j] / 1000; }
  function colour(h) { return PALETTE[h % PALETTE.length]; }
  function viridis(x) {
    var t = Math.max(0, Math.min(1, x)) * (VIRIDIS.length - 1), k = Math.min(Math.floor(t), VIRIDIS.length - 2);
    var f = t - k, a = VIRIDIS[k], b = VIRIDIS[k + 1];
    return "rgb(" + [0, 1, 2].map(function (c) { return Math.round(a[c] + f * (b[c] - a[c])); }).join(",") + ")";
  }
  function el(name, attrs, parent) {
    var e = document.createElementNS(SVG, name);
    for (var key in attrs) e.setAttribute(key, attrs[key]);
    if (parent) parent.appendChild(e);
    return e;
  }
  function controls() {
    var layer = q(".layer");
    data.layer_names.forEach(function (name, i) {
      var o = document.createElement("option"); o.value = i; o.textContent = name; layer.appendChild(o);
    });
    layer.value = state.layer;
    layer.onchange = function () { state.layer = +layer.value; draw(); };
    var heads = q(".heads"), single = q(".head"), groups = q(".groups");
    if (group > 1) for (var g = 0; g < nHeads / group; g++) (function (g) {
      var b = document.createElement("button"); b.className = "group";
      b.textContent = "KV group " + g + " (heads " + g * group + "-" + (g * group + group - 1) + ")";
      b.onclick = function () {
        var boxes = heads.querySelectorAll("input");
        for (var h = 0; h < nHeads; h++) { state.heads[h] = inGroup(h, g); boxes[h].checked = state.heads[h]; }
        drawHeads();
      };
      groups.appendChild(b);
    })(g);
    for (var h = 0; h < nHeads; h++) (function (h) {
      var label = document.createElement("label"), box = document.createElement("input");
      box.type = "checkbox"; box.checked = state.heads[h];
      box.onchange = function () { state.heads[h] = box.checked; drawHeads(); };
      var swatch = document.createElement("span"); swatch.className = "swatch";
      swatch.style.background = colour(h);
      label.appendChild(box); label.appendChild(swatch);
      label.appendChild(document.createTextNode(data.head_names[h]));
      heads.appendChild(label);
      var o = document.createElement("option"); o.value = h; o.textContent = data.head_names[h];
      single.appendChild(o);
    })(h);
    single.value = state.head;
    single.onchange = function () { state.head = +single.value; drawMatrix(); };
    q(".png").onclick = savePng;
    q(".svg").onclick = saveSvg;
  }
  function drawHeads() {
    var svg = q(".head-view"), row = 18, width = 420, left = 150, right = width - 150;
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    svg.setAttribute("width", width); svg.setAttribute("height", row * n + 10);
    for (var i = 0; i < n; i++) for (var h = 0; h < nHeads; h++) {
      if (!state.heads[h] || (state.focus !== null && state.focus !== i)) continue;
      for (var j = 0; j < n; j++) {
        var x = w(state.layer, h, i, j);
        if (x < 0.01) continue;
        el("line", {x1: left + 4, y1: row * i + 14, x2: right - 4, y2: row * j + 14, "class": "edge",
                    stroke: colour(h), "stroke-width": 2, "stroke-opacity": x}, svg);
      }
    }
    tokens.forEach(function (t, i) {
      var a = el("text", {x: left, y: row * i + 18, "text-anchor": "end", "class": "tok"}, svg);
      a.textContent = t;
      a.onmouseenter = function () { state.focus = i; drawHeads(); };
      a.onmouseleave = function () { state.focus = null; drawHeads(); };
      el("text", {x: right, y: row * i + 18, "class": "tok"}, svg).textContent = t;
    });
  }
  function matrixSvg() {
    var cell = Math.max(6, Math.min(28, Math.floor(560 / n))), pad = 8 * Math.max.apply(null, tokens.map(function (t) { return t.length; })) + 10;
    var width = pad + cell * n + 10, height = pad + cell * n + 40;
    var svg = el("svg", {xmlns: SVG, width: width, height: height, "class": "matrix-view"});
    el("rect", {x: 0, y: 0, width: width, height: height, fill: "#fff"}, svg);
    for (var s = 0; s <= 20; s++)  // the colour scale, 0 to 1, under the matrix
      el("rect", {x: pad + s * 8, y: pad + cell * n + 12, width: 8, height: 10, fill: viridis(s / 20)}, svg);
    [0, 0.5, 1].forEach(function (v) {
      el("text", {x: pad + v * 160, y: pad + cell * n + 36, "text-anchor": "middle"}, svg).textContent = v;
    });
    var head = state.head, layer = state.layer, tip = q(".tip");
    tokens.forEach(function (t, i) {
      el("text", {x: pad - 4, y: pad + cell * i + cell / 2 + 4, "text-anchor": "end"}, svg).textContent = t;
      el("text", {x: 0, y: 0, transform: "translate(" + (pad + cell * i + cell / 2 + 4) + "," + (pad - 4) + ") rotate(-90)"}, svg).textContent = t;
      for (var j = 0; j < n; j++) (function (i, j) {
        var x = w(layer, head, i, j);
        var r = el("rect", {x: pad + cell * j, y: pad + cell * i, width: cell, height: cell, fill: viridis(x), "class": "cell"}, svg);
        var text = tokens[i] + " \u2192 " + tokens[j] + ": " + x.toFixed(3);
        if (cell >= 26)  // room for the value in the cell
          el("text", {x: pad + cell * j + cell / 2, y: pad + cell * i + cell / 2 + 4, "text-anchor": "middle",
                      "font-size": 9, fill: x > 0.55 ? "#000" : "#fff", "pointer-events": "none"}, svg).textContent = x.toFixed(2).replace(/^0/, "");
        el("title", {}, r).textContent = text;
        r.onmouseenter = function () { tip.textContent = "query " + text.replace(" \u2192 ", " \u2192 key "); };
      })(i, j);
    });
    return svg;
  }
  function drawMatrix() {
    var box = q(".matrix-box");
    while (box.firstChild) box.removeChild(box.firstChild);
    box.appendChild(matrixSvg());
    q(".matrix-title").textContent = data.layer_names[state.layer] + ", " + data.head_names[state.head] + " (rows: queries, columns: keys)";
  }
  function download(name, url) {
    var a = document.createElement("a"); a.href = url; a.download = name;
    document.body.appendChild(a); a.click(); document.body.removeChild(a);
  }
  function saveSvg() {
    var text = new XMLSerializer().serializeToString(q(".matrix-view"));
    download("attention.svg", "data:image/svg+xml;charset=utf-8," + encodeURIComponent(text));
  }
  function savePng() {  // drawn again on a canvas, cell by cell: no image decoding, no tainting
    var cell = 16, pad = 8 * Math.max.apply(null, tokens.map(function (t) { return t.length; })) + 10;
    var canvas = document.createElement("canvas"), c = canvas.getContext("2d");
    canvas.width = pad + cell * n + 10; canvas.height = pad + cell * n + 10;
    c.fillStyle = "#fff"; c.fillRect(0, 0, canvas.width, canvas.height);
    c.font = "12px monospace"; c.fillStyle = "#222";
    tokens.forEach(function (t, i) {
      c.textAlign = "right"; c.fillText(t, pad - 4, pad + cell * i + cell / 2 + 4);
      c.save(); c.translate(pad + cell * i + cell / 2 + 4, pad - 4); c.rotate(-Math.PI / 2);
      c.textAlign = "left"; c.fillText(t, 0, 0); c.restore();
      for (var j = 0; j < n; j++) {
        c.fillStyle = viridis(w(state.layer, state.head, i, j));
        c.fillRect(pad + cell * j, pad + cell * i, cell, cell);
        c.fillStyle = "#222";
      }
    });
    download("attention.png", canvas.toDataURL("image/png"));
  }
  function draw() { drawHeads(); drawMatrix(); }
  controls();
  draw();
  root.setAttribute("data-status", "drawn");
}
"""

_BODY = """<div class="minattn-view" id="{uid}">
<div class="title"><b>{title}</b></div>
<div class="controls">layer <select class="layer"></select></div>
<div class="controls groups"></div>
<div class="controls heads"></div>
<div class="scroll"><svg class="head-view" xmlns="http://www.w3.org/2000/svg"></svg></div>
<div class="controls">matrix of <select class="head"></select>
<button class="png">save PNG</button> <button class="svg">save SVG</button></div>
<div class="matrix-title"></div><div class="matrix-box scroll"></div>
<div class="tip"></div>
<div class="errors"></div>
</div>
<script>
(function () {{
  var root = document.getElementById("{uid}");
  function report(message) {{ root.querySelector(".errors").textContent += "error: " + message + "\\n"; }}
  window.addEventListener("error", function (e) {{ report(e.message); }});
  try {{
{js}
    minattnView(root, {data});
  }} catch (e) {{ report(e && e.stack ? e.stack : e); }}
}})();
</script>"""


def attention_fragment(tokens, weights, *, title="attention", layer_names=None, layer=0, head=0,
                       group_size=1):
    """tokens [L] (str), weights [n_layers][H, L, L] in [0, 1] (rows: queries) -> an HTML
    fragment (a <div>, its <style> and <script>) that draws the head and matrix views, opened
    at `layer` and `head`. group_size: query heads per KV head (grouped-query attention; head h
    reads KV head h // group_size): the page opens on head's group and names each head's."""
    tokens, weights = _check_view(tokens, weights)
    n_layers, n_heads = weights.shape[:2]
    if not (0 <= layer < n_layers and 0 <= head < n_heads):
        raise ValueError(f"layer must be in [0, {n_layers - 1}] and head in [0, {n_heads - 1}], "
                         f"got layer={layer}, head={head}")
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1 or \
            n_heads % group_size:
        raise ValueError(f"group_size must be a positive int dividing the {n_heads} heads, got "
                         f"{group_size!r}")
    data = {"tokens": tokens,
            "weights": numpy.rint(weights * 1000).astype(int).reshape(n_layers, n_heads, -1).tolist(),
            "layer_names": list(layer_names or (f"layer {i}" for i in range(n_layers))),
            "head_names": [f"head {h}" + (f" (kv {h // group_size})" if group_size > 1 else "")
                           for h in range(n_heads)],
            "group_size": group_size, "start": [layer, head]}
    body = _BODY.format(uid=f"minattn-{uuid.uuid4().hex[:12]}", title=html.escape(title),
                        js=_JS, data=json.dumps(data, separators=(",", ":")).replace("</", "<\\/"))
    return f"<style>{_CSS}</style>\n{body}"


def attention_page(tokens, weights, **options):
    """-> a whole HTML document (str) holding attention_fragment(tokens, weights, **options): one
    file, nothing fetched."""
    title = options.get("title", "attention")
    fragment = attention_fragment(tokens, weights, **options)
    return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{html.escape(title)}"
            f"</title></head>\n<body>\n{fragment}\n</body></html>\n")


def save_attention_html(path, tokens, weights, **options):
    """Write attention_page(tokens, weights, **options) to path (UTF-8) -> path."""
    page = attention_page(tokens, weights, **options)
    with open(path, "w", encoding="utf-8") as file:
        file.write(page)
    return path


class AttentionView:
    """AttentionView(tokens, weights) shows itself in Jupyter (_repr_html_); .save(path) writes
    the page."""

    def __init__(self, tokens, weights, **options):
        self.tokens, self.weights = _check_view(tokens, weights)
        self.options = options  # title, layer_names, layer, head, group_size: as attention_fragment's

    def _repr_html_(self):
        return attention_fragment(self.tokens, self.weights, **self.options)

    def save(self, path):
        return save_attention_html(path, self.tokens, self.weights, **self.options)


def _check_view(tokens, weights):
    if isinstance(tokens, str) or not all(isinstance(t, str) for t in tokens):
        raise TypeError("tokens must be a list of str")
    tokens = list(tokens)
    if not tokens:
        raise ValueError("an attention page needs at least one token, got none")
    if len(tokens) > MAX_TOKENS:
        raise ValueError(f"an attention page draws at most {MAX_TOKENS} tokens, got "
                         f"{len(tokens)}: shorten the text")
    weights = numpy.asarray(weights, dtype=float)
    if weights.ndim == 3:  # one layer
        weights = weights[None]
    if weights.ndim != 4 or weights.shape[2:] != (len(tokens), len(tokens)):
        raise ValueError(f"weights must be [n_layers, H, L, L] with L = {len(tokens)} tokens, got "
                         f"shape {weights.shape}")
    if weights.size > MAX_VALUES:
        raise ValueError(f"an attention page holds at most {MAX_VALUES} weights, got "
                         f"{weights.size} ({weights.shape}): shorten the text")
    if not numpy.all(numpy.isfinite(weights)) or weights.min() < 0 or weights.max() > 1:
        raise ValueError("weights must be finite and in [0, 1]")
    return tokens, weights
