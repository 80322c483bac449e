// memread explore: draws the view JSON of memread.explore.view (no libraries, no network beyond this server).
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  const el = (tag, cls, text) => {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  };
  const SVG = "http://www.w3.org/2000/svg";
  const state = { view: null, views: [], info: null, rows: {}, panels: {}, groups: {} };
  window.memreadState = state;

  function message(text, error) {
    const m = $("message");
    m.textContent = text || "";
    m.className = error ? "error" : "";
  }

  // ---------------------------------------------------------------- a matrix row
  function rowWeights(p, i) {
    const w = new Float64Array(p.cols.length);
    const cell = p.cells[i];
    if (!cell) return w;
    const first = cell[0], ws = cell[1];
    for (let j = 0; j < ws.length; j++) if (first + j < w.length) w[first + j] = ws[j];
    if (cell.length > 2) w[0] += cell[2];
    return w;
  }

  function shade(x, max, rgb) {
    const a = max > 0 ? Math.min(1, x / max) : 0;
    return `rgba(${rgb},${a.toFixed(3)})`;
  }

  // ---------------------------------------------------------------- panels
  function matrixPanel(p) {
    const box = el("div", "panel matrix");
    box.id = "panel-" + p.id;
    box.appendChild(el("h2", null, p.title));
    const n = p.rows.length;
    const stepper = el("div", "stepper");
    const prev = el("button", "prev", "\u25c0");
    const next = el("button", "next", "\u25b6");
    const range = document.createElement("input");
    range.type = "range"; range.min = 0; range.max = Math.max(0, n - 1); range.value = 0; range.className = "step";
    const label = el("span", "steplabel");
    prev.type = next.type = "button";
    stepper.append(el("span", null, (p.rowAxis || "row") + ":"), prev, range, next, label);
    box.appendChild(stepper);
    const topk = el("div", "topk");
    if (p.topk) box.appendChild(topk);
    let arcs = null;
    if (p.arcs && p.cols.length <= 300) { arcs = el("div", "arcs"); box.appendChild(arcs); }
    const tokens = el("div", "tokens");
    const marks = new Set(p.marks || []);
    const spans = p.cols.map((c, j) => {
      const s = el("span", "tok", c);
      s.dataset.col = j;
      if (marks.has(c)) s.classList.add("cand");
      tokens.appendChild(s);
      tokens.appendChild(document.createTextNode(" "));
      return s;
    });
    box.appendChild(tokens);
    const colRow = new Map();
    (p.rowCol || []).forEach((c, i) => colRow.set(c, i));
    tokens.addEventListener("mouseover", (e) => {
      const j = e.target.dataset ? e.target.dataset.col : undefined;
      if (j !== undefined && colRow.has(+j)) setRow(p, colRow.get(+j));
    });
    const heat = el("div", "heat");
    const tip = el("div", "tip");
    const canvas = document.createElement("canvas");
    heat.appendChild(canvas);
    box.append(tip, heat);
    const cell = Math.max(1, Math.min(22, Math.floor(900 / Math.max(1, p.cols.length))));
    const cellH = Math.max(1, Math.min(22, Math.floor(900 / Math.max(1, n))));
    // a small matrix (a sentence, a translation) gets its words along both axes; a long text only the shading
    const FONT = "11px system-ui, sans-serif";
    const labelled = p.cols.length <= 80 && n <= 80;
    const short = (t) => (t.length > 16 ? t.slice(0, 15) + "\u2026" : t);
    let left = 0, top = 0;
    if (labelled) {
      const m = canvas.getContext("2d"); m.font = FONT;
      for (const r of p.rows) left = Math.max(left, m.measureText(short(r)).width);
      for (const c of p.cols) top = Math.max(top, m.measureText(short(c)).width);
      left = Math.ceil(left) + 8; top = Math.ceil(top) + 8;
    }
    canvas.width = left + p.cols.length * cell; canvas.height = top + n * cellH;
    let max = 0;
    const rowsW = [];
    for (let i = 0; i < n; i++) { const w = rowWeights(p, i); rowsW.push(w); for (const x of w) if (x > max) max = x; }
    function drawHeat(cur) {
      const ctx = canvas.getContext("2d");
      ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, canvas.width, canvas.height);
      for (let i = 0; i < n; i++) {
        const w = rowsW[i];
        for (let j = 0; j < w.length; j++) if (w[j] > 0) {
          ctx.fillStyle = shade(w[j], max, "30,90,170"); ctx.fillRect(left + j * cell, top + i * cellH, cell, cellH);
        }
      }
      if (labelled) {
        ctx.font = FONT; ctx.fillStyle = "#333"; ctx.textBaseline = "middle";
        ctx.textAlign = "right";
        p.rows.forEach((r, i) => { ctx.fillStyle = i === cur ? "#d04000" : "#333"; ctx.fillText(short(r), left - 4, top + i * cellH + cellH / 2); });
        ctx.fillStyle = "#333"; ctx.textAlign = "left";
        p.cols.forEach((c, j) => {
          ctx.save(); ctx.translate(left + j * cell + cell / 2, top - 4); ctx.rotate(-Math.PI / 2);
          ctx.fillText(short(c), 0, 0); ctx.restore();
        });
      }
      ctx.strokeStyle = "#d04000"; ctx.lineWidth = 1;
      ctx.strokeRect(left + 0.5, top + cur * cellH + 0.5, canvas.width - left - 1, Math.max(1, cellH - 1));
    }
    canvas.addEventListener("mousemove", (e) => {
      const r = canvas.getBoundingClientRect();
      const i = Math.floor((e.clientY - r.top - top) / cellH), j = Math.floor((e.clientX - r.left - left) / cell);
      if (i < 0 || i >= n || j < 0 || j >= p.cols.length) return;
      setRow(p, i);
      tip.textContent = `${p.rows[i]} \u2192 ${p.cols[j]}: ${rowsW[i][j].toFixed(4)}`;
    });
    prev.addEventListener("click", () => setRow(p, state.rows[p.id] - 1));
    next.addEventListener("click", () => setRow(p, state.rows[p.id] + 1));
    range.addEventListener("input", () => setRow(p, +range.value));

    function drawArcs(i, w) {
      if (!arcs) return;
      arcs.textContent = "";
      const step = 46, W = p.cols.length * step + 20;
      const x = (j) => 10 + j * step + step / 2;
      const me = p.rowCol ? p.rowCol[i] : i;
      let wmax = 0, far = 0;
      for (let j = 0; j < w.length; j++) { if (w[j] > wmax) wmax = w[j]; if (w[j] > 0) far = Math.max(far, Math.abs(j - me)); }
      const h = Math.max(30, Math.min(150, far * step * 0.45 + 10));
      const svg = document.createElementNS(SVG, "svg");
      svg.setAttribute("width", W); svg.setAttribute("height", h + 28);
      for (let j = 0; j < w.length; j++) {
        if (w[j] <= 0.02 * wmax || j === me) continue;
        const a = x(Math.min(j, me)), b = x(Math.max(j, me));
        const path = document.createElementNS(SVG, "path");
        const top = h - Math.min(h - 6, (b - a) * 0.45);
        path.setAttribute("d", `M${a},${h} C${a},${top} ${b},${top} ${b},${h}`);
        path.setAttribute("fill", "none");
        path.setAttribute("stroke", shade(w[j], wmax, "30,90,170"));
        path.setAttribute("stroke-width", (0.5 + 4 * w[j] / wmax).toFixed(2));
        path.dataset.col = j; path.dataset.w = w[j];
        svg.appendChild(path);
      }
      p.cols.forEach((c, j) => {
        const t = document.createElementNS(SVG, "text");
        t.setAttribute("x", x(j)); t.setAttribute("y", h + 18); t.setAttribute("text-anchor", "middle");
        t.setAttribute("font-size", "12"); if (j === me) t.setAttribute("fill", "#d04000");
        t.textContent = c.length > 7 ? c.slice(0, 6) + "\u2026" : c;
        svg.appendChild(t);
      });
      arcs.appendChild(svg);
    }

    state.panels[p.id] = {
      p, box, render(i) {
        const w = rowsW[i] || new Float64Array(p.cols.length);
        let m = 0; for (const v of w) if (v > m) m = v;
        const me = p.rowCol ? p.rowCol[i] : -1;
        spans.forEach((s, j) => {
          s.style.background = shade(w[j], m, "30,90,170");
          s.style.color = m > 0 && w[j] / m > 0.6 ? "#fff" : "";
          s.dataset.w = w[j];
          s.classList.toggle("cur", j === me);
          s.classList.toggle("written", !!p.writes && m > 0 && w[j] / m > 0.5);
        });
        range.value = i;
        label.textContent = `${i + 1}/${n}: ${p.rows[i]}`;
        box.dataset.row = i;
        if (p.topk) {
          topk.textContent = "";
          const nx = p.next ? p.next[i] : null;
          if (nx) topk.appendChild(el("span", "w", `next word "${nx[0]}": p = ${nx[1].toFixed(4)}`));
          topk.appendChild(el("span", "w", "top " + (p.topk[i] || []).length + ":"));
          for (const [word, q] of p.topk[i] || []) topk.appendChild(el("span", "w", `${word} ${q.toFixed(4)}`));
        }
        drawArcs(i, w);
        drawHeat(i);
      },
    };
    if (p.group) (state.groups[p.group] = state.groups[p.group] || []).push(p.id);
    return box;
  }

  function setRow(p, i) {
    const n = p.rows.length;
    if (!n) return;
    i = Math.max(0, Math.min(n - 1, i));
    const ids = p.group ? state.groups[p.group] : [p.id];
    for (const id of ids) { state.rows[id] = i; state.panels[id].render(i); }
  }

  function barsPanel(p) {
    const box = el("div", "panel bars");
    box.id = "panel-" + p.id;
    box.appendChild(el("h2", null, p.title));
    let max = 0; for (const v of p.values) if (v > max) max = v;
    p.labels.forEach((l, k) => {
      const r = el("div", "bar" + (String(l) === String(p.highlight) ? " best" : ""));
      const f = el("div", "fill"); f.style.width = (max > 0 ? 300 * p.values[k] / max : 0) + "px";
      r.append(el("span", "lab", l), f, el("span", "val", p.values[k].toFixed(4)));
      r.dataset.label = l; r.dataset.value = p.values[k];
      box.appendChild(r);
    });
    return box;
  }

  function profilePanel(p) {
    const box = el("div", "panel profile-panel");
    box.id = "panel-" + p.id;
    box.appendChild(el("h2", null, p.title));
    const chart = el("div", "profile");
    let max = 0; for (const v of p.values) if (v > max) max = v;
    p.labels.forEach((l, k) => {
      const c = el("div", "col");
      const b = el("div", "b"); b.style.height = (max > 0 ? 90 * p.values[k] / max : 0) + "px";
      b.title = (100 * p.values[k]).toFixed(1) + "%";
      c.append(el("span", null, (100 * p.values[k]).toFixed(0)), b, el("span", null, l));
      chart.appendChild(c);
    });
    box.appendChild(chart);
    return box;
  }

  // ---------------------------------------------------------------- a view
  function render(view) {
    state.view = view; state.rows = {}; state.panels = {}; state.groups = {};
    const summary = $("summary"), notes = $("notes"), panels = $("panels");
    summary.textContent = ""; notes.textContent = ""; panels.textContent = "";
    for (const [k, v] of view.summary || []) {
      const d = el("span", "item"); d.append(el("b", null, k + ":"), document.createTextNode(String(v)));
      summary.appendChild(d);
    }
    for (const n of view.notes || []) notes.appendChild(el("div", "note", n));
    for (const p of view.panels || []) {
      if (p.type === "matrix") panels.appendChild(matrixPanel(p));
      else if (p.type === "bars") panels.appendChild(barsPanel(p));
      else if (p.type === "profile") panels.appendChild(profilePanel(p));
    }
    for (const p of view.panels || []) if (p.type === "matrix" && !(p.id in state.rows)) setRow(p, p.rows.length > 1 ? 1 : 0);
    document.body.dataset.rendered = String((+document.body.dataset.rendered || 0) + 1);
  }

  function showModel(info) {
    $("model").textContent = `${info.kind} \u00b7 reader ${info.reader || "-"} \u00b7 head ${info.head || "-"} \u00b7 ${info.source}`;
    $("limit").textContent = `at most ${info.max_tokens} tokens`;
    if (info.kind === "translate") {  // greedy or beam search: the decoded output's attention either way
      const sel = $("beam");
      if (![...sel.options].some((o) => +o.value === info.beam)) {
        const o = el("option", null, `beam ${info.beam}`); o.value = info.beam; sel.appendChild(o);
      }
      sel.value = String(info.beam);
      $("beam-box").hidden = false;
    }
  }

  // ---------------------------------------------------------------- the server's page
  function parseInput(text) {
    const t = text.trim();
    if (!t) return { error: "the input is empty: type or paste a text" };
    if (t.startsWith("{")) {
      try { return { input: JSON.parse(t) }; } catch (e) { return { error: "not a valid JSON record: " + e.message }; }
    }
    const n = t.split(/\s+/).length;
    if (state.info && n > state.info.max_tokens)
      return { error: `the input has ${n} tokens; explore reads at most ${state.info.max_tokens} at a time (memread predict reads longer texts)` };
    return { input: text };
  }

  async function submit() {
    const parsed = parseInput($("input").value);
    if (parsed.error) { message(parsed.error, true); return; }
    $("busy").hidden = false; $("submit").disabled = true; message("");
    try {
      const r = await fetch("api/predict", {
        method: "POST", headers: { "Content-Type": "application/json" },
        body: JSON.stringify(state.info && state.info.kind === "translate"
          ? { input: parsed.input, beam: +$("beam").value } : { input: parsed.input }),
      });
      const data = await r.json().catch(() => ({ error: `the server answered ${r.status}` }));
      if (!r.ok || data.error) { message(data.error || `the server answered ${r.status}`, true); return; }
      render(data);
    } catch (e) {
      message("the server could not be reached: " + e.message, true);
    } finally {
      $("busy").hidden = true; $("submit").disabled = false;
    }
  }

  async function start() {
    const fixed = window.MEMREAD_STATIC;
    if (fixed) {  // a file written by --html: the views it holds, no server
      $("form").hidden = true;
      state.info = fixed.model; state.views = fixed.views;
      showModel(fixed.model);
      const which = $("which");
      fixed.views.forEach((v, k) => {
        const o = el("option", null, `${k + 1}: ${JSON.stringify(v.input).slice(0, 80)}`); o.value = k; which.appendChild(o);
      });
      $("inputs").hidden = fixed.views.length < 2;
      which.addEventListener("change", () => render(fixed.views[+which.value]));
      if (fixed.views.length) render(fixed.views[0]);
      return;
    }
    $("submit").addEventListener("click", submit);
    $("input").addEventListener("keydown", (e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) submit(); });
    try {
      const r = await fetch("api/info");
      const info = await r.json();
      state.info = info.model;
      showModel(info.model);
      const sel = $("examples");
      (info.examples || []).forEach((ex, k) => {
        const o = el("option", null, `${info.split} #${k + 1}: ${JSON.stringify(ex).slice(0, 70)}`);
        o.value = k; sel.appendChild(o);
      });
      sel.addEventListener("change", () => {
        if (sel.value === "") return;
        const ex = info.examples[+sel.value];
        $("input").value = Object.keys(ex).length === 1 && typeof Object.values(ex)[0] === "string"
          ? Object.values(ex)[0] : JSON.stringify(ex);
        submit();
      });
    } catch (e) {
      message("the server could not be reached: " + e.message, true);
    }
  }
  window.memreadRender = render;
  document.addEventListener("DOMContentLoaded", start);
})();
