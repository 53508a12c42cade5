// azx explore: the page's whole behaviour. It talks to the explorer's JSON interface
// (/api/...) and draws what comes back; it holds one game, so every tab plays its own.
"use strict";

const $ = (id) => document.getElementById(id);
let runs = [];
let game = null;
// The position shown: null for the position now, else a frame (0: the start) stepped to.
let frameIndex = null;

async function api(method, path, body) {
  const options = { method, headers: {} };
  if (body !== undefined) {
    options.headers["Content-Type"] = "application/json";
    options.body = JSON.stringify(body);
  }
  const response = await fetch(path, options);
  let data;
  try {
    data = await response.json();
  } catch (e) {
    throw new Error(`the explorer answered ${response.status} without JSON`);
  }
  if (!response.ok) throw new Error(data.error || `error ${response.status}`);
  return data;
}

// Runs one request at a time; the body's data-state says "busy" or "ready" (the tests wait
// on it), and any error is shown above the board.
async function busy(work) {
  document.body.dataset.state = "busy";
  for (const button of document.querySelectorAll("button")) button.disabled = true;
  try {
    $("error").hidden = true;
    await work();
  } catch (error) {
    $("error").textContent = error.message;
    $("error").hidden = false;
  } finally {
    document.body.dataset.state = "ready";
    for (const button of document.querySelectorAll("header button, h2 button, #stepper button")) {
      button.disabled = false;
    }
    if (game) drawMoves(game);
  }
}

const round = (x) => Number(x.toPrecision(6));
const percent = (x) => (x === null || x === undefined ? "" : (100 * x).toFixed(1) + "%");
const signed = (x) => (x === null || x === undefined ? "–" : (x >= 0 ? "+" : "") + x.toFixed(3));

function drawMoves(view) {
  const moves = $("moves");
  moves.replaceChildren();
  const layout = view.layout;
  const legal = new Set(view.legal);
  moves.hidden = view.single_player;
  const yourTurn =
    view.to_move === "you" && frameIndex === null && document.body.dataset.state !== "busy";
  const button = (action) => {
    const b = document.createElement("button");
    b.textContent = layout.names[action];
    b.dataset.action = action;
    b.disabled = !(yourTurn && legal.has(action));
    b.addEventListener("click", () => play(action));
    return b;
  };
  let actions;
  if (layout.kind === "grid") {
    moves.style.gridTemplateColumns = `repeat(${layout.cols}, 1fr)`;
    actions = [...Array(layout.rows * layout.cols).keys()];
  } else if (layout.kind === "column") {
    moves.style.gridTemplateColumns = `repeat(${layout.cols}, 1fr)`;
    actions = [...Array(layout.cols).keys()];
  } else {
    moves.style.gridTemplateColumns = "repeat(auto-fill, minmax(4em, 1fr))";
    actions = view.legal;
  }
  for (const action of actions) moves.append(button(action));
  // Other actions than the board's squares (a pass): their own buttons.
  if (layout.kind !== "list") {
    for (let action = actions.length; action < layout.names.length; action++) {
      moves.append(button(action));
    }
  }
}

function draw(view) {
  game = view;
  frameIndex = null;
  document.body.dataset.game = view.id;
  document.body.dataset.move = view.move;
  $("board").innerHTML = view.svg || `<p>(no drawing of ${view.game})</p>`;
  $("frame-label").textContent = frameLabel(view.frames - 1, view.frames, view.return);
  let status;
  if (view.single_player) {
    const stopped = view.over ? "" : ", stopped there";
    status = `Episode of ${view.run}: ${view.move} moves, return ${round(view.return)}${stopped}`;
  } else if (view.opponent !== "you") {
    status = `Replay of azx against ${view.opponent}: ${view.result || "unfinished"} (${view.move} moves)`;
  } else if (view.over) status = `${view.result} (${view.move} moves)`;
  else if (view.to_move === "you") status = `Your move (${view.run}, ${view.simulations} simulations)`;
  else status = "azx is thinking…";
  $("status").textContent = status;
  $("history").hidden = view.single_player;
  $("history").replaceChildren(
    ...view.history.map((m) => {
      const li = document.createElement("li");
      li.textContent = `${m.by}: ${m.name}`;
      return li;
    })
  );
  drawMoves(view);
  if (view.last_analysis) {
    drawAnalysis(view.last_analysis, `Why azx played ${view.last_analysis.action_name} (move ${view.last_analysis.move + 1})`);
  } else {
    const run = runs.find((r) => r.name === view.run);
    let why = "The agent's analysis of its last move appears here.";
    if (run && run.episodes) {
      why = `The episode of ${run.algorithm} as its evaluation plays it: its moves are shown without an analysis.`;
    } else if (run && !run.analysed) {
      why = "A MuZero agent plans in its learned model: its moves are shown without an analysis.";
    }
    drawAnalysis(null, why);
  }
}

function frameLabel(index, frames, total) {
  const shown = game && game.single_player ? ` · return ${round(total)}` : "";
  return `position ${index} of ${frames - 1}${shown}`;
}

// Steps through the game's positions: the board, and the analysis of the move made there.
function step(where) {
  return busy(async () => {
    if (!game) throw new Error("start a game first");
    const last = game.frames - 1;
    const now = frameIndex === null ? last : frameIndex;
    const target = Math.max(0, Math.min(last, where(now, last)));
    const frame = await api("GET", `/api/games/${game.id}/frames/${target}`);
    frameIndex = target === last ? null : target;
    document.body.dataset.frame = target;
    $("board").innerHTML = frame.svg;
    $("frame-label").textContent = frameLabel(target, frame.frames, frame.return);
    if (frame.analysis) {
      drawAnalysis(frame.analysis, `Why azx played ${frame.name} (move ${target + 1})`);
    } else if (frame.by !== null) {
      // Another player's move, or an agent's move shown without an analysis (a policy's).
      const who = frame.by === "you" ? "You" : frame.by;
      drawAnalysis(null, `${who} played ${frame.name} (move ${target + 1})`);
    } else {
      drawAnalysis(null, target === last ? "The position now." : "");
    }
  });
}

function drawAnalysis(a, title) {
  $("analysis-title").textContent = title;
  const body = $("analysis").querySelector("tbody");
  body.replaceChildren();
  $("summary").replaceChildren();
  drawChance(a);
  if (!a) return;
  const facts = [
    ["network value", signed(a.value)],
    ["search value", signed(a.root_value)],
    ["chosen move", a.action_name],
    ["principal variation", a.pv_names.join(" ")],
    ["simulations", String(a.simulations)],
  ];
  for (const [term, value] of facts) {
    const dt = document.createElement("dt");
    dt.textContent = term;
    const dd = document.createElement("dd");
    dd.textContent = value;
    dd.dataset.fact = term;
    $("summary").append(dt, dd);
  }
  const order = [...a.legal].sort((x, y) =>
    a.visits ? a.visits[y] - a.visits[x] || a.prior[y] - a.prior[x] : a.policy[y] - a.policy[x]
  );
  for (const action of order) {
    const tr = document.createElement("tr");
    tr.dataset.action = action;
    if (action === a.action) tr.className = "chosen";
    const name = game && game.layout ? game.layout.names[action] : String(action);
    const cells = [
      name,
      percent(a.prior[action]),
      a.visits ? String(a.visits[action]) : "",
      a.visit_share ? percent(a.visit_share[action]) : "",
      a.q ? signed(a.q[action]) : "",
      percent(a.policy[action]),
    ];
    for (const text of cells) {
      const td = document.createElement("td");
      td.textContent = text;
      tr.append(td);
    }
    body.append(tr);
  }
}

// Learning curves: one line per seed of the chosen run, drawn as an SVG in the page.
const SVG = "http://www.w3.org/2000/svg";
const COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];
let curves = null;

function svgElement(name, attributes, text) {
  const element = document.createElementNS(SVG, name);
  for (const [key, value] of Object.entries(attributes)) element.setAttribute(key, value);
  if (text !== undefined) element.textContent = text;
  return element;
}

function drawCurve() {
  const box = $("curve");
  box.replaceChildren();
  const metric = $("metric").value;
  if (!curves || !metric) return;
  const lines = curves.seeds.map((seed) => ({ name: seed.name, points: seed.points[metric] || [] }));
  const all = lines.flatMap((line) => line.points);
  if (all.length === 0) return;
  const [width, height, left, bottom] = [720, 300, 60, 30];
  const xs = all.map((p) => p[0]), ys = all.map((p) => p[1]);
  let [x0, x1, y0, y1] = [Math.min(...xs), Math.max(...xs), Math.min(...ys), Math.max(...ys)];
  if (x1 === x0) x1 = x0 + 1;
  if (y1 === y0) { y0 -= 0.5; y1 += 0.5; }
  const X = (x) => left + ((x - x0) / (x1 - x0)) * (width - left - 10);
  const Y = (y) => 10 + (1 - (y - y0) / (y1 - y0)) * (height - bottom - 10);
  const svg = svgElement("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img" });
  svg.append(svgElement("line", { class: "axis", x1: left, y1: height - bottom, x2: width - 10, y2: height - bottom }));
  svg.append(svgElement("line", { class: "axis", x1: left, y1: 10, x2: left, y2: height - bottom }));
  for (const [y, anchor] of [[y0, height - bottom], [y1, 14]]) {
    svg.append(svgElement("text", { x: left - 4, y: anchor, "text-anchor": "end" }, y.toPrecision(3)));
  }
  svg.append(svgElement("text", { x: left, y: height - 10 }, String(x0)));
  svg.append(svgElement("text", { x: width - 10, y: height - 10, "text-anchor": "end" }, `${x1} iterations`));
  lines.forEach((line, index) => {
    const colour = COLOURS[index % COLOURS.length];
    const points = line.points.map(([x, y]) => `${X(x)},${Y(y)}`).join(" ");
    svg.append(svgElement("polyline", { points, fill: "none", stroke: colour, "stroke-width": 2, "data-seed": line.name }));
    for (const [x, y] of line.points) svg.append(svgElement("circle", { cx: X(x), cy: Y(y), r: 2.5, fill: colour }));
    svg.append(svgElement("text", { x: left + 10, y: 24 + 14 * index, fill: colour }, line.name));
  });
  box.append(svg);
}

async function loadCurves(run) {
  curves = await api("GET", `/api/runs/${run}/curves`);
  const select = $("metric");
  const previous = select.value;
  select.replaceChildren(...curves.metrics.map((name) => new Option(name, name)));
  const preferred = [previous, ...curves.metrics.filter((n) => /^eval\.search\..*score$/.test(n)),
    ...curves.metrics.filter((n) => /^eval\..*score$/.test(n)),
    ...curves.metrics.filter((n) => /return/.test(n)), "loss"];
  select.value = preferred.find((name) => curves.metrics.includes(name)) || curves.metrics[0] || "";
  drawCurve();
}

// At a chance node (after the chosen move, in 2048 or backgammon): the outcomes'
// probabilities, and the search's visits and Q where it planned over them.
function drawChance(a) {
  const panel = $("chance-panel");
  panel.hidden = !(a && a.chance);
  if (panel.hidden) return;
  $("chance-title").textContent = `Chance after ${a.action_name}`;
  const rows = [...a.chance].sort((x, y) => y.probability - x.probability);
  $("chance").querySelector("tbody").replaceChildren(
    ...rows.map((row) => {
      const tr = document.createElement("tr");
      tr.dataset.outcome = row.outcome;
      for (const text of [
        String(row.outcome),
        percent(row.probability),
        row.visits === null ? "" : String(row.visits),
        signed(row.q),
      ]) {
        const td = document.createElement("td");
        td.textContent = text;
        tr.append(td);
      }
      return tr;
    })
  );
}

function simulations() {
  const text = $("simulations").value.trim();
  return text === "" ? undefined : Number(text);
}

function newGame() {
  return busy(async () => {
    const run = Number($("run").value);
    draw(
      await api("POST", "/api/games", {
        run,
        human_first: $("side").value === "first",
        seed: Number($("seed").value || 0),
        simulations: simulations(),
      })
    );
  });
}

function play(action) {
  return busy(async () => {
    $("status").textContent = "azx is thinking…";
    draw(await api("POST", `/api/games/${game.id}/move`, { action }));
  });
}

function openReplay() {
  return busy(async () => {
    draw(await api("POST", "/api/replays", { replay: Number($("replay").value) }));
  }).then(() => step(() => 0));
}

function undo() {
  return busy(async () => draw(await api("POST", `/api/games/${game.id}/undo`)));
}

function analyse() {
  return busy(async () => {
    if (!game) throw new Error("start a game first");
    const n = simulations();
    const query = n === undefined ? "" : `?simulations=${encodeURIComponent(n)}`;
    const a = await api("GET", `/api/games/${game.id}/analysis${query}`);
    drawAnalysis(a, `The position after move ${a.move} (${a.simulations} simulations)`);
  });
}

async function start() {
  $("new").addEventListener("click", newGame);
  $("undo").addEventListener("click", undo);
  $("analyse").addEventListener("click", analyse);
  $("open-replay").addEventListener("click", openReplay);
  $("metric").addEventListener("change", drawCurve);
  $("first").addEventListener("click", () => step(() => 0));
  $("back").addEventListener("click", () => step((now) => now - 1));
  $("forward").addEventListener("click", () => step((now) => now + 1));
  $("last").addEventListener("click", () => step((now, last) => last));
  $("run").addEventListener("change", () => busy(() => loadCurves(Number($("run").value))));
  await busy(async () => {
    const served = await api("GET", "/api/runs");
    runs = served.runs;
    $("replay-controls").hidden = served.replays.length === 0;
    $("replay").replaceChildren(
      ...served.replays.map(
        (replay, index) =>
          new Option(`${replay.name}: ${replay.result || ""} (${replay.moves} moves)`, index)
      )
    );
    const select = $("run");
    runs.forEach((run, index) => {
      const option = document.createElement("option");
      option.value = index;
      option.textContent = `${run.name} (${run.game}, iteration ${run.iteration})`;
      select.append(option);
    });
    const playable = runs.findIndex((run) => run.plays === null);
    select.value = Math.max(playable, 0);
    await loadCurves(Number(select.value));
  });
  const chosen = runs[Number($("run").value)];
  if (chosen && chosen.plays === null) await newGame();
  else $("status").textContent = chosen ? chosen.plays : "The explorer serves no run.";
}

start();
