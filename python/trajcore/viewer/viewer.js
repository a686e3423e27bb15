// The trajcore episode viewer. Reads the page's data (#trajcore-data: see
// trajcore/viewer/_content.py for the model) and its frame blocks (#trajcore-block-N: base64 of
// deflated byte-wise differences between consecutive frames, see trajcore/viewer/_frames.py).
// Images: model.image (the large one) and model.more_images (image leaves of the observation,
// other agents' images), each with its own blocks from its offset on. An env episode's page
// (model.agents) tags every field, plot and image with its agent; the picker shows one or all.
// No network: everything is in this file.
"use strict";
(() => {
  const model = JSON.parse(document.getElementById("trajcore-data").textContent);
  const $ = (id) => document.getElementById(id);
  const last = model.rows - 1; // rows 0 .. last; steps 0 .. last - 1

  // What tests and scripts can drive: goto(row), the row shown, the row whose frame is drawn.
  const api = {
    row: 0,
    drawnRow: -1,
    firstDrawMs: null,
    goto: (row) => goto(row),
    play: () => setPlaying(true),
    pause: () => setPlaying(false),
    showAgent: (agent) => showAgent(agent),
  };
  window.trajcoreViewer = api;

  // --- header -----------------------------------------------------------------------------
  $("title").textContent = model.title;
  const describe = (list, key, value) => {
    const item = document.createElement("div");
    const dt = document.createElement("dt");
    const dd = document.createElement("dd");
    dt.textContent = key;
    dd.textContent = typeof value === "object" && value !== null ? JSON.stringify(value) : String(value);
    item.append(dt, dd);
    list.append(item);
  };
  for (const [key, value] of Object.entries(model.summary)) {
    if (key === "metadata" && value && Object.keys(value).length === 0) continue;
    if (key === "provenance") continue; // its own section, below
    describe($("summary"), key, value);
  }
  // Where the episode came from (env spec, wrappers, versions, git, reset seed, policy).
  const provenance = model.summary.provenance;
  if (provenance && Object.keys(provenance).length > 0) {
    for (const [key, value] of Object.entries(provenance)) describe($("provenance-list"), key, value);
    $("provenance").hidden = false;
  }
  for (const note of model.notes) {
    const li = document.createElement("li");
    li.textContent = note;
    $("notes").append(li);
  }

  // --- the values beside the frame ----------------------------------------------------------
  const cells = [];
  const groupTitles = {
    observation: "observation",
    step: "step (taken from this observation)",
    info: "info",
  };
  const groupRows = []; // [group, its heading cell, agent]
  let group = null;
  for (const field of model.fields) {
    const agent = field.agent ?? null;
    if (field.group !== group || agent !== groupRows[groupRows.length - 1][2]) {
      group = field.group;
      const tr = document.createElement("tr");
      tr.className = "group";
      if (agent !== null) tr.dataset.agent = agent;
      const th = document.createElement("th");
      th.colSpan = 2;
      tr.append(th);
      $("table").append(tr);
      groupRows.push([group, th, agent]);
    }
    const tr = document.createElement("tr");
    tr.dataset.field = field.name;
    if (agent !== null) tr.dataset.agent = agent;
    const th = document.createElement("th");
    th.textContent = field.name;
    const td = document.createElement("td");
    tr.append(th, td);
    $("table").append(tr);
    cells.push([field, td]);
  }

  function showValues(row) {
    const stepName = model.agents ? "env step" : "step";
    for (const [g, th, agent] of groupRows) {
      const rowText = g === "step" ? (row < last ? `${stepName} ${row}` : "no step") : `row ${row}`;
      th.textContent = `${agent === null ? "" : `${agent} · `}${groupTitles[g]} · ${rowText}`;
    }
    for (const [field, td] of cells) {
      let text;
      if (field.timeline === "step" && row >= last) {
        text = null;
        td.title = "the final observation: no step was taken from it";
      } else {
        text = field.text[row];
        td.title = text === null ? "not given at this row" : "";
      }
      td.textContent = text === null ? "—" : text;
      td.className = text === null ? "missing" : "";
    }
  }

  // --- frames -------------------------------------------------------------------------------
  // One view per image: its canvas, its decoded-block cache. The first is drawn large (#frame).
  const CACHE_BLOCKS = 6;
  const views = [];

  function addView(image, canvas, note, box) {
    canvas.width = image.width;
    canvas.height = image.height;
    const view = { image, canvas, note, box, ctx: canvas.getContext("2d"), cache: new Map() };
    view.pixels = view.ctx.createImageData(image.width, image.height);
    if (image.agent !== null && image.agent !== undefined) box.dataset.agent = image.agent;
    views.push(view);
    return view;
  }

  const caption = (image) => `${image.agent === null || image.agent === undefined ? "" : `${image.agent} · `}${image.source}`;
  if (model.image) {
    const view = addView(model.image, $("frame"), $("frame-note"), $("screen"));
    // As large as the column allows, but never taller than 62% of the window.
    view.canvas.style.width = `min(100%, ${((62 * view.image.width) / view.image.height).toFixed(3)}vh)`;
    $("frame-caption").textContent = caption(model.image);
    if (view.box.dataset.agent !== undefined) $("frame-caption").dataset.agent = view.box.dataset.agent;
  } else {
    $("screen").classList.add("empty");
  }
  (model.more_images || []).forEach((image, k) => {
    const figure = document.createElement("figure");
    figure.className = "image";
    const label = document.createElement("figcaption");
    label.textContent = caption(image);
    const screen = document.createElement("div");
    screen.className = "screen";
    const canvas = document.createElement("canvas");
    canvas.id = `frame-${k + 1}`;
    canvas.dataset.source = image.source;
    const note = document.createElement("div");
    note.className = "frame-note";
    screen.append(canvas, note);
    figure.append(label, screen);
    $("more-images").append(figure);
    addView(image, canvas, note, figure);
  });

  function blockOf(image, kept) {
    const blocks = image.blocks;
    let lo = 0;
    let hi = blocks.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (blocks[mid].first <= kept) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  }

  async function decodeBlock(image, b) {
    const id = `trajcore-block-${(image.offset || 0) + b}`;
    const text = document.getElementById(id).textContent.trim();
    const binary = atob(text);
    const packed = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i++) packed[i] = binary.charCodeAt(i);
    const stream = new Blob([packed]).stream().pipeThrough(new DecompressionStream("deflate"));
    const frames = new Uint8Array(await new Response(stream).arrayBuffer());
    const size = image.width * image.height * image.channels;
    // Each frame after the first is its difference to the one before (mod 256).
    for (let f = 1; f < image.blocks[b].count; f++) {
      const at = f * size;
      for (let j = 0; j < size; j++) frames[at + j] += frames[at - size + j];
    }
    return frames;
  }

  function block(view, b) {
    const cache = view.cache;
    let p = cache.get(b);
    if (p) {
      cache.delete(b); // most recently used last
    } else {
      p = decodeBlock(view.image, b);
    }
    cache.set(b, p);
    while (cache.size > CACHE_BLOCKS) cache.delete(cache.keys().next().value);
    return p;
  }

  function paint(view, frames, offset) {
    const { image, pixels } = view;
    const out = pixels.data;
    const n = image.width * image.height;
    if (image.channels === 3) {
      for (let i = 0, s = offset, d = 0; i < n; i++, s += 3, d += 4) {
        out[d] = frames[s];
        out[d + 1] = frames[s + 1];
        out[d + 2] = frames[s + 2];
        out[d + 3] = 255;
      }
    } else {
      for (let i = 0, s = offset, d = 0; i < n; i++, s++, d += 4) {
        out[d] = out[d + 1] = out[d + 2] = frames[s];
        out[d + 3] = 255;
      }
    }
    view.ctx.putImageData(pixels, 0, 0);
  }

  // Draws one view's frame of `row`; false when a later request came first.
  async function drawView(view, row, ticket) {
    const { image, canvas, ctx, note } = view;
    const kept = Math.min(Math.floor(row / image.stride), image.present.length - 1);
    const b = blockOf(image, kept);
    const frames = await block(view, b);
    if (ticket !== drawing) return false;
    if (!image.present[kept]) {
      ctx.fillStyle = "#444";
      ctx.fillRect(0, 0, canvas.width, canvas.height);
      const why = model.agents ? "the agent did not act or observe at this row" : "not rendered for this row";
      note.textContent = `no frame at row ${kept * image.stride} (${why})`;
    } else {
      const size = image.width * image.height * image.channels;
      paint(view, frames, (kept - image.blocks[b].first) * size);
      const from = kept * image.stride;
      note.textContent = from === row ? "" : `frame of row ${from} (every ${image.stride}th frame kept)`;
    }
    if (b + 1 < image.blocks.length) block(view, b + 1); // decode ahead while this one is shown
    return true;
  }

  let drawing = 0; // the latest draw request wins
  async function drawFrame(row) {
    const ticket = ++drawing;
    const drawn = await Promise.all(views.map((view) => drawView(view, row, ticket)));
    if (ticket !== drawing || !drawn.every(Boolean)) return;
    finishDraw(row);
  }

  function finishDraw(row) {
    api.drawnRow = row;
    if (api.firstDrawMs === null) api.firstDrawMs = performance.now();
  }

  // --- plots -------------------------------------------------------------------------------
  const plots = [];
  for (const spec of model.plots) {
    const box = document.createElement("div");
    box.className = "plot";
    box.dataset.plot = spec.name;
    if (spec.agent !== undefined) box.dataset.agent = spec.agent;
    const label = document.createElement("div");
    label.className = "label";
    const name = document.createElement("span");
    name.textContent = spec.agent === undefined ? `${spec.name} ` : `${spec.agent} · ${spec.name} `;
    const value = document.createElement("span");
    value.className = "value";
    label.append(name, value);
    const c = document.createElement("canvas");
    box.append(label, c);
    $("plots").append(box);
    plots.push({ spec, canvas: c, value, base: null });
    c.addEventListener("pointerdown", (e) => {
      c.setPointerCapture(e.pointerId);
      gotoFromPlot(e, c);
    });
    c.addEventListener("pointermove", (e) => {
      if (e.buttons & 1) gotoFromPlot(e, c);
    });
  }

  const PAD = { left: 46, right: 8, top: 8, bottom: 16 };

  function xOf(row, width) {
    return PAD.left + (last > 0 ? (row / last) * (width - PAD.left - PAD.right) : 0);
  }

  function gotoFromPlot(e, c) {
    const r = c.getBoundingClientRect();
    const x = ((e.clientX - r.left) / r.width) * c.width;
    const frac = (x - PAD.left) / (c.width - PAD.left - PAD.right);
    goto(Math.round(Math.max(0, Math.min(1, frac)) * last));
  }

  function drawBase(p) {
    const ratio = window.devicePixelRatio || 1;
    const width = Math.max(200, Math.round(p.canvas.clientWidth * ratio));
    const height = Math.round(120 * ratio);
    p.canvas.width = width;
    p.canvas.height = height;
    const base = document.createElement("canvas");
    base.width = width;
    base.height = height;
    const g = base.getContext("2d");
    const values = p.spec.values;
    let lo = Infinity;
    let hi = -Infinity;
    for (const v of values) {
      if (v !== null) {
        lo = Math.min(lo, v);
        hi = Math.max(hi, v);
      }
    }
    if (lo === Infinity) {
      lo = 0;
      hi = 1;
    }
    if (lo === hi) {
      lo -= 0.5;
      hi += 0.5;
    }
    const y = (v) => PAD.top + (1 - (v - lo) / (hi - lo)) * (height - PAD.top - PAD.bottom);
    g.font = `${10 * ratio}px system-ui, sans-serif`;
    g.fillStyle = "#6a6f75";
    g.textBaseline = "middle";
    g.fillText(fmt(hi), 2, y(hi));
    g.fillText(fmt(lo), 2, y(lo));
    g.textBaseline = "bottom";
    g.fillText("0", PAD.left, height);
    const end = `row ${last}`;
    g.fillText(end, width - PAD.right - g.measureText(end).width, height);
    g.strokeStyle = "#d9dcdf";
    g.beginPath();
    g.moveTo(PAD.left, y(lo));
    g.lineTo(width - PAD.right, y(lo));
    g.stroke();
    g.strokeStyle = "#1d1f21";
    g.lineWidth = ratio;
    g.beginPath();
    let pen = false;
    for (let i = 0; i < values.length; i++) {
      const v = values[i];
      if (v === null) {
        pen = false;
        continue;
      }
      const px = xOf(i, width);
      if (pen) g.lineTo(px, y(v));
      else g.moveTo(px, y(v));
      pen = true;
    }
    g.stroke();
    if (values.length < 200) {
      g.fillStyle = "#1d1f21";
      for (let i = 0; i < values.length; i++) {
        if (values[i] !== null) g.fillRect(xOf(i, width) - ratio, y(values[i]) - ratio, 2 * ratio, 2 * ratio);
      }
    }
    p.base = base;
  }

  function fmt(v) {
    return Math.abs(v) >= 1e5 || (Math.abs(v) < 1e-3 && v !== 0) ? v.toExponential(2) : String(+v.toPrecision(4));
  }

  function showPlots(row) {
    for (const p of plots) {
      if (!p.base) drawBase(p);
      const g = p.canvas.getContext("2d");
      g.clearRect(0, 0, p.canvas.width, p.canvas.height);
      g.drawImage(p.base, 0, 0);
      // On a pixel's centre: a crisp line, not two half-covered columns.
      const x = Math.round(xOf(row, p.canvas.width)) + 0.5;
      g.strokeStyle = "#1f6feb";
      g.lineWidth = Math.max(1, Math.round(window.devicePixelRatio || 1));
      g.beginPath();
      g.moveTo(x, 0);
      g.lineTo(x, p.canvas.height);
      g.stroke();
      const v = p.spec.values[row];
      p.value.textContent = v === undefined ? "(no step)" : v === null ? "—" : String(v);
    }
  }

  window.addEventListener("resize", () => {
    for (const p of plots) p.base = null;
    showPlots(api.row);
  });

  // --- position, controls, keys --------------------------------------------------------------
  const slider = $("slider");
  slider.max = String(last);

  function goto(row) {
    const r = Math.max(0, Math.min(last, Math.round(Number(row)) || 0));
    api.row = r;
    slider.value = String(r);
    const where = r < last ? `${model.agents ? "env step" : "step"} ${r} of ${last}` : "the final observation";
    $("position").textContent = `row ${r} of ${last} · ${where}`;
    showValues(r);
    showPlots(r);
    return drawFrame(r);
  }

  slider.addEventListener("input", () => {
    setPlaying(false);
    goto(slider.value);
  });

  const speeds = [0.1, 0.25, 0.5, 1, 2, 4, 8, 16];
  for (const s of speeds) {
    const o = document.createElement("option");
    o.value = String(s);
    o.textContent = `${s}x (${+(s * model.fps).toFixed(1)} rows/s)`;
    if (s === 1) o.selected = true;
    $("speed").append(o);
  }

  let playing = false;
  let clock = 0;
  let carried = 0;
  function setPlaying(on) {
    playing = on && last > 0;
    $("play").innerHTML = playing ? "&#10074;&#10074;" : "&#9654;";
    if (playing) {
      if (api.row >= last) goto(0);
      clock = performance.now();
      carried = 0;
      requestAnimationFrame(tick);
    }
  }
  function tick(now) {
    if (!playing) return;
    carried += ((now - clock) / 1000) * model.fps * Number($("speed").value);
    clock = now;
    const advance = Math.floor(carried);
    if (advance > 0) {
      carried -= advance;
      goto(api.row + advance);
      if (api.row >= last) {
        setPlaying(false);
        return;
      }
    }
    requestAnimationFrame(tick);
  }
  $("play").addEventListener("click", () => setPlaying(!playing));

  document.addEventListener("keydown", (e) => {
    if (e.target instanceof HTMLSelectElement) return;
    const by = e.shiftKey ? 10 : 1;
    let handled = true;
    if (e.key === "ArrowRight" || e.key === "ArrowDown") goto(api.row + by);
    else if (e.key === "ArrowLeft" || e.key === "ArrowUp") goto(api.row - by);
    else if (e.key === "Home") goto(0);
    else if (e.key === "End") goto(last);
    else if (e.key === " " || e.key === "k") setPlaying(!playing);
    else handled = false;
    if (handled) {
      if (e.key !== " " && e.key !== "k") setPlaying(false);
      e.preventDefault(); // the slider would move a second time
    }
  });

  $("screen").addEventListener(
    "wheel",
    (e) => {
      e.preventDefault();
      setPlaying(false);
      goto(api.row + (e.deltaY > 0 ? 1 : -1));
    },
    { passive: false },
  );

  // --- agents: show one, or all ------------------------------------------------------------
  // Everything of an agent (table rows, plots, images) carries data-agent; null shows all.
  function showAgent(agent) {
    const chosen = agent && model.agents && model.agents.includes(agent) ? agent : null;
    for (const el of document.querySelectorAll("[data-agent]")) el.hidden = chosen !== null && el.dataset.agent !== chosen;
    $("agent").value = chosen ?? "";
    api.agent = chosen;
    for (const p of plots) p.base = null; // a plot shown again draws at its new width
    showPlots(api.row);
  }
  if (model.agents) {
    const all = document.createElement("option");
    all.value = "";
    all.textContent = `all ${model.agents.length} agents`;
    $("agent").append(all);
    for (const agent of model.agents) {
      const o = document.createElement("option");
      o.value = agent;
      o.textContent = agent;
      $("agent").append(o);
    }
    $("agent").addEventListener("change", () => showAgent($("agent").value));
  } else {
    $("agent-pick").hidden = true;
  }

  // A link to a row: page.html#row=120 opens there (and changing the hash goes there);
  // #agent=NAME (also with &row=) shows that agent only.
  const linkedRow = () => {
    const linked = /(?:^#|&)row=(\d+)/.exec(window.location.hash);
    return linked ? Number(linked[1]) : null;
  };
  const linkedAgent = () => {
    const linked = /(?:^#|&)agent=([^&]*)/.exec(window.location.hash);
    return linked ? decodeURIComponent(linked[1]) : null;
  };
  window.addEventListener("hashchange", () => {
    if (model.agents && linkedAgent() !== null) showAgent(linkedAgent());
    if (linkedRow() !== null) goto(linkedRow());
  });
  if (model.agents && linkedAgent() !== null) showAgent(linkedAgent());
  goto(linkedRow() ?? 0);
})();
