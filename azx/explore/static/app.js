// azx explore: the page's whole behaviour. It talks to the explorer's JSON interface
// (/api/...) and draws what comes back; it holds one game, so every tab plays its own.
"use strict";

const $ = (id) => document.getElementById(id);
let runs = [];
let game = null;

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
    for (const button of document.querySelectorAll("header button, h2 button")) button.disabled = false;
    if (game) drawMoves(game);
  }
}

const percent = (x) => (x === null || x === undefined ? "" : (100 * x).toFixed(1) + "%");
const signed = (x) => (x === null || x === undefined ? "–" : (x >= 0 ? "+" : "") + x.toFixed(3));

function drawMoves(view) {
  const moves = $("moves");
  moves.replaceChildren();
  const layout = view.layout;
  const legal = new Set(view.legal);
  const yourTurn = view.to_move === "you" && document.body.dataset.state !== "busy";
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
  document.body.dataset.game = view.id;
  document.body.dataset.move = view.move;
  $("board").innerHTML = view.svg || `<p>(no drawing of ${view.game})</p>`;
  let status;
  if (view.over) status = `${view.result} (${view.move} moves)`;
  else if (view.to_move === "you") status = `Your move (${view.run}, ${view.simulations} simulations)`;
  else status = "azx is thinking…";
  $("status").textContent = status;
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
    drawAnalysis(null, "The agent's analysis of its last move appears here.");
  }
}

function drawAnalysis(a, title) {
  $("analysis-title").textContent = title;
  const body = $("analysis").querySelector("tbody");
  body.replaceChildren();
  $("summary").replaceChildren();
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
  await busy(async () => {
    runs = (await api("GET", "/api/runs")).runs;
    const select = $("run");
    runs.forEach((run, index) => {
      const option = document.createElement("option");
      option.value = index;
      option.textContent = `${run.name} (${run.game}, iteration ${run.iteration})`;
      option.disabled = run.plays !== null;
      select.append(option);
    });
    const playable = runs.findIndex((run) => run.plays === null);
    if (playable < 0) throw new Error("none of the runs served plays a two-player game");
    select.value = playable;
  });
  if (runs.some((run) => run.plays === null)) await newGame();
}

start();
