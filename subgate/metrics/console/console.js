// The subgate web console: polls /api/console once a second, draws the tables, the topic tree and two charts
// (message rates from the server's totals, mean journal commit time from the writer's histogram), and, once
// signed in, sends actions (unsubscribe, remove a topic, close a connection) with HTTP basic credentials.
// Every value from the server goes into the page as text (textContent), never as markup.
"use strict";

const POLL_MS = 1000;
const KEEP = 120; // samples kept per chart
const state = {
  credentials: null,
  previous: null,
  rates: { in: [], out: [] },
  commits: [],
  openPaths: new Set(),
  unreachable: false,
  refused: false,
};

function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (cls) node.className = cls;
  return node;
}

function age(seconds) {
  if (seconds === null || seconds === undefined) return "-";
  const s = Math.max(0, Math.floor(seconds));
  if (s >= 86400) return `${Math.floor(s / 86400)}d ${Math.floor((s % 86400) / 3600)}h`;
  if (s >= 3600) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
  if (s >= 60) return `${Math.floor(s / 60)}m ${s % 60}s`;
  return `${s}s`;
}

function notice(text, isError) {
  const box = document.getElementById("notice");
  box.textContent = text;
  box.className = isError ? "error" : "";
}

// -- charts -----------------------------------------------------------------------------------------------------
function push(series, value) {
  series.push(value);
  if (series.length > KEEP) series.shift();
}

function draw(canvas, lines) {
  const ctx = canvas.getContext("2d");
  const w = canvas.width, h = canvas.height, left = 48, bottom = 16;
  ctx.clearRect(0, 0, w, h);
  const all = lines.flatMap((line) => line.values);
  const top = Math.max(1, ...all) * 1.1;
  ctx.strokeStyle = "#dde"; ctx.fillStyle = "#678"; ctx.font = "11px system-ui";
  for (let i = 0; i <= 4; i++) {
    const y = (h - bottom) * (1 - i / 4);
    ctx.beginPath(); ctx.moveTo(left, y); ctx.lineTo(w, y); ctx.stroke();
    ctx.fillText((top * i / 4).toFixed(top < 10 ? 1 : 0), 2, Math.max(10, y));
  }
  for (const line of lines) {
    ctx.strokeStyle = line.color; ctx.lineWidth = 2; ctx.beginPath();
    line.values.forEach((v, i) => {
      const x = left + (w - left) * (i + KEEP - line.values.length) / (KEEP - 1);
      const y = (h - bottom) * (1 - v / top);
      if (i === 0) ctx.moveTo(x, y); else ctx.lineTo(x, y);
    });
    ctx.stroke();
  }
  canvas.dataset.samples = String(lines[0].values.length);
  canvas.dataset.last = String(lines[0].values.length ? lines[0].values[lines[0].values.length - 1] : 0);
  canvas.dataset.max = String(Math.max(0, ...lines[0].values));
}

function sample(view) {
  const previous = state.previous;
  if (previous && view.taken > previous.taken) {
    const dt = view.taken - previous.taken;
    push(state.rates.in, (view.server.messages_in - previous.server.messages_in) / dt);
    push(state.rates.out, (view.server.messages_out - previous.server.messages_out) / dt);
    if (view.commit && previous.commit) {
      const commits = view.commit.count - previous.commit.count;
      push(state.commits, commits > 0 ? 1000 * (view.commit.sum - previous.commit.sum) / commits : 0);
    }
  }
  if (!previous || view.taken > previous.taken) state.previous = view;
  draw(document.getElementById("rate-chart"), [
    { values: state.rates.in, color: "#1a5fb4" },
    { values: state.rates.out, color: "#e66100" },
  ]);
  draw(document.getElementById("commit-chart"), [{ values: state.commits, color: "#26a269" }]);
}

// -- tables -----------------------------------------------------------------------------------------------------
function row(cells, numeric, action) {
  const tr = el("tr");
  cells.forEach((cell, i) => tr.appendChild(el("td", cell, numeric.includes(i) ? "num" : "")));
  if (action) {
    const td = el("td");
    const button = el("button", action.label, "act");
    button.addEventListener("click", action.run);
    td.appendChild(button);
    tr.appendChild(td);
  }
  return tr;
}

function fill(id, rows, total) {
  const body = document.querySelector(`#${id} tbody`);
  body.replaceChildren(...rows);
  const shown = rows.length;
  document.getElementById(`${id}-count`).textContent = total > shown ? `(${shown} of ${total})` : `(${shown})`;
}

function render(view) {
  const server = view.server;
  document.getElementById("server-name").textContent = `'${server.name}' ${server.version}`;
  document.getElementById("summary").textContent =
    `up ${age(server.uptime)} · amqp ${server.listen} · ${server.connections} connections · ` +
    `${server.queues} queues · ${server.topics} topics · store ${server.store}`;
  const now = view.taken;
  fill("connections", view.connections.map((c) => row(
    [c.id, c.container_id, c.principal || "(anonymous)", c.remote || "-", c.links, age(now - c.opened / 1000)],
    [0, 4, 5],
    { label: "close", run: () => act("/api/connections/close", { id: c.id }, `close connection #${c.id}`) },
  )), view.truncated.connections);
  fill("queues", view.queues.map((q) => row(
    [q.name, q.depth, q.available, q.paged, q.consumers, q.messages_in, q.messages_out], [1, 2, 3, 4, 5, 6],
  )), view.truncated.queues);
  fill("subscriptions", view.subscriptions.map((s) => row(
    [s.kind, s.client_id === null ? "(global)" : s.client_id, s.name, s.topic, s.consumers,
      s.backlog === null ? "?" : s.backlog, age(s.oldest_unaccepted_seconds)],
    [4, 5],
    s.durable ? { label: "unsubscribe", run: () => act("/api/unsubscribe", { name: s.name, client_id: s.client_id },
      `unsubscribe ${s.name}`) } : null,
  )), view.truncated.subscriptions);
  const registrations = [
    ...view.removals.map((r) => row(["remove-with-session", r.branch, r.registrations], [2])),
    ...view.handlers.map((h) => row(["missing-topic handler", h.path || "(root)", h.handlers], [2])),
  ];
  document.querySelector("#registrations tbody").replaceChildren(...registrations);
  renderTree(view.topics, view.truncated.topics);
}

// -- the topic tree ---------------------------------------------------------------------------------------------
function treeOf(topics) {
  const root = { children: new Map() };
  for (const topic of topics) {
    let node = root, path = "";
    for (const segment of topic.path.split("/")) {
      path = path ? `${path}/${segment}` : segment;
      if (!node.children.has(segment)) node.children.set(segment, { path, children: new Map(), topic: null });
      node = node.children.get(segment);
    }
    node.topic = topic;
  }
  return root;
}

function figures(topic) {
  if (!topic) return "";
  const size = topic.value_size === null ? "no value" : `value ${topic.value_size} B`;
  return `subscriptions ${topic.subscriptions} · ${size}`;
}

function topicNode(name, node) {
  const label = el("span", name, "segment");
  const extra = el("span", figures(node.topic), "figures");
  const remove = node.topic ? el("button", "remove", "act") : null;
  if (remove) remove.addEventListener("click", (event) => {
    event.preventDefault();
    act("/api/topics/remove", { selector: node.path }, `remove topic ${node.path}`);
  });
  if (node.children.size === 0) {
    const leaf = el("div", null, "leaf");
    leaf.dataset.path = node.path;
    leaf.append(label, extra);
    if (remove) leaf.append(" ", remove);
    return leaf;
  }
  const details = el("details");
  details.dataset.path = node.path;
  details.open = state.openPaths.has(node.path);
  details.addEventListener("toggle", () => {
    if (details.open) state.openPaths.add(node.path); else state.openPaths.delete(node.path);
  });
  const summary = el("summary");
  summary.append(label, extra);
  if (remove) summary.append(" ", remove);
  details.appendChild(summary);
  for (const [child, grand] of [...node.children.entries()].sort()) details.appendChild(topicNode(child, grand));
  return details;
}

function renderTree(topics, total) {
  const root = treeOf(topics);
  const nodes = [...root.children.entries()].sort().map(([name, node]) => topicNode(name, node));
  document.getElementById("topic-tree").replaceChildren(...nodes);
  document.getElementById("topics-count").textContent =
    total > topics.length ? `(${topics.length} of ${total})` : `(${topics.length})`;
}

// -- actions ----------------------------------------------------------------------------------------------------
async function act(route, body, what) {
  if (!state.credentials) return notice("sign in first", true);
  if (!window.confirm(`${what}?`)) return;
  const response = await fetch(route, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-Subgate-Console": "1",
      "Authorization": `Basic ${btoa(state.credentials)}` },
    body: JSON.stringify(body),
  });
  const answer = await response.json().catch(() => ({}));
  const ok = response.status < 300;
  notice(`${what}: ${answer.message || answer.error || response.status}`, !ok);
}

function signIn(event) {
  event.preventDefault();
  const user = document.getElementById("user").value;
  const password = document.getElementById("password").value;
  state.credentials = user ? `${user}:${password}` : null;
  document.body.classList.toggle("signed", Boolean(user));
  const mode = document.getElementById("mode");
  mode.textContent = user ? `signed in as ${user}` : "read-only";
  mode.className = user ? "signed" : "";
}

// -- polling ----------------------------------------------------------------------------------------------------
async function poll() {
  try {
    const headers = { "X-Subgate-Console": "1" };
    if (state.credentials) headers.Authorization = `Basic ${btoa(state.credentials)}`;
    const response = await fetch("/api/console", { cache: "no-store", headers });
    const view = await response.json();
    if (response.status === 401 || response.status === 403) {
      // Logins are on: reading takes a user holding CONTROL_SERVER (docs/security.md).
      document.getElementById("signin").hidden = false;
      notice(view.error || `HTTP ${response.status}`, true);
      state.refused = true;
      return;
    }
    if (state.refused) notice("");
    state.refused = false;
    document.getElementById("signin").hidden = !view.actions && !state.credentials;
    if (!view.pending) {
      render(view);
      sample(view);
    }
    if (state.unreachable) notice("");
    state.unreachable = false;
  } catch (error) {
    state.unreachable = true;
    notice(`the server does not answer: ${error}`, true);
  } finally {
    setTimeout(poll, POLL_MS);
  }
}

document.getElementById("signin").addEventListener("submit", signIn);
poll();
