// The upload page (kb_assets/upload): check names and sizes before sending, send each accepted
// file with a progress bar (XMLHttpRequest upload progress), then follow the builds, the corpus
// and the request queue by polling the server's JSON API (kb_assets/upload/app.py).
"use strict";

const POLL_MS = 2000;          // builds and tasks
const SLOW_POLL_MS = 5000;     // corpus and requests
const PARALLEL_UPLOADS = 2;    // files sent at once

const state = {
  token: sessionStorage.getItem("kb-upload-token") || "",
  config: null,
  queue: [],
  sending: 0,
  shown: {},                   // last JSON rendered per section, to skip identical redraws
  polling: false,
};

// --- small helpers -------------------------------------------------------------------------
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "text") node.textContent = value;
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function bytes(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

function show(message) {
  const box = document.getElementById("message");
  box.textContent = message;
  box.hidden = !message;
}

function authHeaders(extra) {
  const headers = Object.assign({}, extra);
  if (state.token) headers.Authorization = `Bearer ${state.token}`;
  return headers;
}

async function api(method, path, body) {
  const changing = method !== "GET";
  const init = { method, headers: authHeaders(changing ? { "X-KB-Upload": "1" } : {}) };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  if (response.status === 401) {
    document.getElementById("token-form").hidden = false;
    throw new Error("this server needs a token");
  }
  const data = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(data.error || `${response.status} ${response.statusText}`);
  return data;
}

async function act(method, path, body) {
  try {
    const data = await api(method, path, body);
    show("");
    refreshAll();
    return data;
  } catch (error) {
    show(error.message);
    return null;
  }
}

// --- adding files --------------------------------------------------------------------------
// What a verdict or an upload's outcome is called (kb_assets/intake.py IntakeStatus): a name
// the corpus holds with other content is a "name clash", the content of one of its versions a
// "duplicate"; "name taken" while the contents could not be compared (no SHA-256 here).
function label(result) {
  if (result.name_clash === true) return "name clash";
  if (result.name_clash === null && result.status === "duplicate") return "name taken";
  return result.status || "refused";
}

// The file's SHA-256 as hex, or null where the browser has no Web Crypto (crypto.subtle
// exists in secure contexts only: https, or http on localhost/127.0.0.1).
async function sha256Hex(file) {
  if (!(window.crypto && window.crypto.subtle)) return null;
  const digest = await window.crypto.subtle.digest("SHA-256", await file.arrayBuffer());
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

// A taken name whose size one of its versions has: check it again with its SHA-256, which
// tells a duplicate (nothing to send) from a name clash (kb_assets/upload/checks.py).
async function compareContent(file, verdict) {
  if (verdict.accepted || verdict.name_clash !== null) return verdict;
  try {
    const sha256 = await sha256Hex(file);
    if (!sha256) return verdict;
    const body = { files: [{ name: file.name, size: file.size, sha256 }] };
    return (await api("POST", "/api/check", body)).files[0];
  } catch (_) {
    return verdict;  // the first verdict stands: nothing is sent either way
  }
}

async function addFiles(fileList) {
  const files = Array.from(fileList || []);
  if (!files.length) return;
  const choice = document.getElementById("edition-of");
  const editionOf = choice.value;
  if (editionOf && files.length > 1) {
    show(`nothing was sent: a next edition is one document; drop one file with "Next edition of" set, or clear it`);
    return;
  }
  let verdicts;
  try {
    const body = { files: files.map((f) => ({ name: f.name, size: f.size })) };
    verdicts = (await api("POST", "/api/check", body)).files;
    verdicts = await Promise.all(files.map((file, i) => compareContent(file, verdicts[i])));
  } catch (error) {
    show(`nothing was sent: ${error.message}`);
    return;
  }
  show("");
  files.forEach((file, i) => {
    const verdict = verdicts[i];
    const row = uploadRow(file);
    if (verdict.accepted) {
      setUpload(row, "queued", editionOf ? "waiting to send as a next edition" : "waiting to send");
      state.queue.push({ file, row, editionOf });
      choice.value = "";  // the choice is for this file only
    } else {
      setUpload(row, verdict.status, `${label(verdict)}: ${verdict.reason}`, label(verdict));
      row.querySelector("progress").style.visibility = "hidden";
      if (verdict.new_version_possible) offerNewVersion(row, file);
    }
  });
  pump();
}

// A name already in the corpus: send the file as that document's next version instead
// (PUT /api/files?new_version=1, the intake's `kb add --new-version`).
function offerNewVersion(row, file) {
  const button = el("button", { type: "button", class: "new-version", text: "Upload as new version" });
  button.addEventListener("click", () => {
    button.remove();
    row.querySelector("progress").style.visibility = "";
    setUpload(row, "queued", "waiting to send as a new version");
    state.queue.push({ file, row, newVersion: true });
    pump();
  });
  row.append(button);
}

function uploadRow(file) {
  const row = el("li", { class: "upload", "data-name": file.name },
    el("span", { class: "name", text: file.name }),
    el("span", { class: "size", text: bytes(file.size) }),
    el("progress", { max: 100, value: 0, "data-percent": 0 }),
    el("span", { class: "why" }));
  document.getElementById("uploads").append(row);
  return row;
}

function setUpload(row, status, text, shown) {
  row.dataset.status = status;
  row.dataset.label = shown || status;
  row.querySelector(".why").textContent = text;
}

function setProgress(row, fraction) {
  const percent = Math.round(fraction * 100);
  const bar = row.querySelector("progress");
  bar.value = percent;
  bar.dataset.percent = percent;
}

function pump() {
  while (state.sending < PARALLEL_UPLOADS && state.queue.length) {
    const { file, row, newVersion, editionOf } = state.queue.shift();
    state.sending += 1;
    send(file, row, newVersion, editionOf).finally(() => {
      state.sending -= 1;
      pump();
    });
  }
}

function send(file, row, newVersion, editionOf) {
  return new Promise((resolve) => {
    const xhr = new XMLHttpRequest();
    const flag = (newVersion ? "&new_version=1" : "")
      + (editionOf ? `&edition_of=${encodeURIComponent(editionOf)}` : "");
    xhr.open("PUT", `/api/files?name=${encodeURIComponent(file.name)}${flag}`);
    const headers = authHeaders({ "X-KB-Upload": "1", "Content-Type": "application/octet-stream" });
    for (const [key, value] of Object.entries(headers)) xhr.setRequestHeader(key, value);
    xhr.upload.onprogress = (event) => {
      if (event.lengthComputable) setProgress(row, event.loaded / event.total);
    };
    xhr.onload = () => {
      let data = {};
      try { data = JSON.parse(xhr.responseText); } catch (_) { /* not JSON: use the status */ }
      finished(row, xhr.status, data, file);
      resolve();
    };
    xhr.onerror = () => {
      setUpload(row, "failed", "the connection broke; drop the file again");
      resolve();
    };
    setUpload(row, "sending", "sending…");
    xhr.send(file);
  });
}

function finished(row, status, data, file) {
  const outcome = data.outcome;
  if (outcome && outcome.status === "added" && outcome.version > 1) {
    setUpload(row, "added",
      `version ${outcome.version} of ${outcome.name}; build requested (see Builds)`);
  } else if (outcome && outcome.status === "added" && outcome.edition_of) {
    setUpload(row, "added", `added as ${outcome.doc_id}, the next edition of ` +
      `${outcome.edition_of}; build requested (see Builds)`);
  } else if (outcome && outcome.status === "added") {
    setUpload(row, "added", `added as ${outcome.doc_id}; build requested (see Builds)`);
  } else if (outcome) {
    setUpload(row, outcome.status, `${label(outcome)}: ${outcome.reason}`, label(outcome));
  } else if (data.file) {
    setUpload(row, data.file.status || "refused", `${label(data.file)}: ${data.file.reason}`,
      label(data.file));
    if (data.file.new_version_possible) offerNewVersion(row, file);
  } else {
    setUpload(row, "failed", data.error || `the server answered ${status}`);
  }
  refreshAll();
}

function setUpDrop() {
  const drop = document.getElementById("drop");
  const picker = document.getElementById("picker");
  picker.addEventListener("change", () => { addFiles(picker.files); picker.value = ""; });
  for (const name of ["dragenter", "dragover"]) {
    drop.addEventListener(name, (event) => { event.preventDefault(); drop.classList.add("over"); });
  }
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", (event) => {
    event.preventDefault();
    drop.classList.remove("over");
    addFiles(event.dataTransfer.files);
  });
  // a file dropped beside the zone must not make the browser navigate away from the page
  window.addEventListener("dragover", (event) => event.preventDefault());
  window.addEventListener("drop", (event) => event.preventDefault());
}

// --- builds --------------------------------------------------------------------------------
function runLink(run) {
  return el("a", { href: run.url, target: "_blank", rel: "noopener", class: "run-link" },
    `run ${run.run_id.slice(0, 8)}`);
}

function stepTable(run) {
  const body = el("tbody");
  for (const step of run.steps) {
    body.append(el("tr", { "data-step": step.asset, "data-state": step.state },
      el("td", { text: step.asset }),
      el("td", {}, el("span", { class: "badge", text: step.state })),
      el("td", { class: "attempts", text: step.attempts > 1 ? `${step.attempts - 1} retr${step.attempts === 2 ? "y" : "ies"}` : "" }),
      el("td", { class: "step-reason", text: step.reason })));
  }
  return el("table", { class: "steps" },
    el("thead", {}, el("tr", {}, el("th", { text: "step" }), el("th", { text: "state" }),
      el("th", { text: "retries" }), el("th", { text: "reason" }))),
    body);
}

// What the card says of the version its newest run builds when kb serves another one (a new
// version waiting, building or failed beside the served one): the catalog status ("ready") is
// the served version's, so the card reads "v2 building — v1 is served", never "v2 ready".
// null when the card's version is the served one, or none is served (the status says it).
function unservedState(build, latest) {
  if (!build.version || !build.serving_version || build.version === build.serving_version) return null;
  if (!latest) return "pending";
  if (!latest.finished) return "building";
  if (latest.status === "failure") return "failed";
  return latest.status === "canceled" ? "canceled" : "not served";
}

// The card of one document's builds: its name and the version its newest run builds (v1, v2,
// …: builds.py run_version), its status (unservedState), and the newest run's steps. A deleted
// document's card keeps its name and offers nothing to run.
function buildCard(build) {
  const latest = build.runs[0];
  const version = build.version ? el("span", { class: "doc-version", "data-role": "version",
    title: `version ${build.version} of ${build.name}`, text: `v${build.version}` }) : null;
  const unserved = unservedState(build, latest);
  const status = unserved || build.status;
  const title = el("h3", {},
    el("span", { class: "doc-name", text: build.name }), version,
    el("span", { class: `badge ${status.replace(/ /g, "-")}`, "data-role": "doc-status", text: status }));
  if (unserved) {
    title.append(el("span", { class: "served", "data-role": "served",
      title: `kb serves version ${build.serving_version} until version ${build.version} is built`,
      text: `— v${build.serving_version} is served` }));
  }
  const card = el("article", { class: "build", "data-doc": build.doc_id, "data-status": build.status,
    "data-version": build.version, "data-serving": build.serving_version }, title);
  const deleted = build.status === "deleted";
  if (deleted) {
    card.append(el("p", { class: "deleted hint",
      text: `${build.name} was deleted from the corpus; its runs stay in the Dagster UI` }));
  }
  if (!latest) {
    card.append(el("p", { class: "hint waiting" },
      "added; waiting for its build run (the intake sensor of the Dagster UI requests one within 15 s) ",
      el("button", { type: "button", class: "build-now",
        onclick: () => act("POST", `/api/documents/${encodeURIComponent(build.doc_id)}/build`) },
        "Build now")));
    return card;
  }
  card.dataset.runStatus = latest.status;
  title.append(el("span", { class: `badge ${latest.status}`, "data-role": "run-status", text: latest.status }),
    runLink(latest));
  if (latest.parent_run_id) title.append(el("span", { class: "hint", text: "re-executed from failure" }));
  else if (latest.rebuild) title.append(el("span", { class: "hint", text: "rebuild" }));
  const reason = build.reason || latest.reason;
  if (reason && (build.status === "failed" || latest.status === "failure")) {
    card.append(el("p", { class: "reason", text: reason }));
  }
  card.append(stepTable(latest));
  if (latest.status === "failure" && !deleted) {
    // a step that refused its input (builds.py: "refused") fails the same way when run again:
    // no retry of the run and no rebuild of that step, the reason says what to do instead
    const failed = latest.steps.filter((step) => step.state === "failed");
    const actions = el("p", { class: "actions" });
    if (failed.some((step) => step.refused)) {
      card.append(el("p", { class: "hint refused", "data-role": "refused",
        text: "Running it again cannot help: kb refused this input. Do what the reason says." }));
    } else {
      actions.append(el("button", { type: "button", class: "retry",
        onclick: () => act("POST", `/api/runs/${latest.run_id}/retry`) }, "Retry from the failed step"));
    }
    for (const step of failed) {
      if (!step.refused && state.config.rebuildable.includes(step.asset)) {
        actions.append(el("button", { type: "button", class: "rebuild", "data-asset": step.asset,
          onclick: () => act("POST", `/api/documents/${encodeURIComponent(build.doc_id)}/rebuild/${step.asset}`) },
          `Rebuild ${step.asset}`));
      }
    }
    if (actions.childElementCount) card.append(actions);
  }
  if (build.runs.length > 1) {
    const earlier = el("p", { class: "earlier" }, `${build.runs.length - 1} earlier run(s): `);
    for (const run of build.runs.slice(1)) {
      earlier.append(runLink(run), run.version ? ` (v${run.version}, ${run.status}) ` : ` (${run.status}) `);
    }
    card.append(earlier);
  }
  return card;
}

async function refreshBuilds() {
  const data = await api("GET", `/api/builds?hours=${state.config.hours}`);
  const json = JSON.stringify(data.builds);
  if (state.shown.builds === json) return;
  state.shown.builds = json;
  const box = document.getElementById("builds");
  box.replaceChildren(...(data.builds.length ? data.builds.map(buildCard)
    : [el("p", { class: "hint", text: "no builds in this window yet" })]));
}

const NO_TASKS = "nothing started from this page yet: the rebuilds, retries and approved "
  + "requests you start here are listed with their progress";

async function refreshTasks() {
  const data = await api("GET", "/api/tasks");
  const json = JSON.stringify(data.tasks);
  if (state.shown.tasks === json) return;
  state.shown.tasks = json;
  document.getElementById("tasks").replaceChildren(...(data.tasks.length ? data.tasks.map((t) =>
    el("li", { class: "task", "data-state": t.state },
      `#${t.id} ${t.label}: ${t.state}${t.message ? ` — ${t.message}` : ""}`))
    : [el("li", { class: "hint", text: NO_TASKS })]));
}

// --- corpus and requests -------------------------------------------------------------------
const CORPUS_ACTIONS = [["graph", "Rebuild graph"], ["embeddings", "Re-embed"], ["figures", "Figures"]];

function cell(value) {
  return el("td", { text: value === null || value === undefined ? "" : value });
}

// A ready document's figure count links to its gallery on the MCP server.
function figuresCell(doc) {
  if (doc.status !== "ready" || !doc.figures || !state.config.gallery_url) return cell(doc.figures);
  const url = state.config.gallery_url.replace("{doc_id}", encodeURIComponent(doc.doc_id));
  return el("td", {}, el("a", { href: url, target: "_blank", rel: "noopener", class: "gallery",
    text: `${doc.figures} (gallery)` }));
}

// The version kb serves (v1, v2, …; the document's own label in brackets) and, under it, a
// newer version added with "Upload as new version" while it is pending, building or failed.
function versionCell(doc) {
  const served = doc.serving_version ? `v${doc.serving_version}` : "";
  const label = doc.version ? (served ? ` (${doc.version})` : doc.version) : "";
  const td = el("td", { class: "version", title: served
    ? `kb serves version ${doc.serving_version}` + (doc.version ? `; the document says ${doc.version}` : "")
    : null }, served + label);
  const next = doc.next_version;
  if (next) {
    td.append(el("div", { class: `next-version badge ${next.state}`, "data-version": next.version,
      "data-state": next.state, text: `v${next.version} ${next.state}` }));
  }
  return td;
}

function corpusRow(doc) {
  const path = `/api/documents/${encodeURIComponent(doc.doc_id)}`;
  const actions = el("td", { class: "actions" });
  if (doc.status === "ready") {  // a rebuild reads the stored outputs of the other steps
    for (const [asset, label] of CORPUS_ACTIONS) {
      actions.append(el("button", { type: "button", "data-asset": asset,
        onclick: () => act("POST", `${path}/rebuild/${asset}`) }, label));
    }
  }
  actions.append(el("button", { type: "button", class: "danger delete", onclick: () => {
    if (confirm(`Delete ${doc.name}? Its vectors, graph edges, files and catalog row are removed.`)) {
      act("DELETE", path);
    }
  } }, "Delete"));
  if (doc.changes) {  // the serving version has a stored comparison with its previous issue
    const total = doc.changes.added + doc.changes.removed + doc.changes.changed + doc.changes.moved;
    actions.prepend(el("button", { type: "button", class: "changes-link",
      onclick: () => showChanges(doc.doc_id) }, `Changes (${total})`));
  }
  const status = el("td", {}, el("span", { class: `badge ${doc.status}`, text: doc.status }));
  if (doc.reason) status.append(el("div", { class: "reason", text: doc.reason }));
  const next = doc.next_version;
  if (next && next.reason) {
    status.append(el("div", { class: "reason", text: `version ${next.version} failed: ${next.reason}` }));
  }
  return el("tr", { "data-doc": doc.doc_id, "data-status": doc.status },
    nameCell(doc, state.names || {}), cell(doc.title), versionCell(doc), cell(doc.pages), cell(doc.chunks),
    figuresCell(doc), status, actions);
}

// "Next edition of": every document not being deleted, by name; the choice survives a refresh.
function fillEditionChoice(documents) {
  const choice = document.getElementById("edition-of");
  const chosen = choice.value;
  const options = documents.filter((doc) => doc.status !== "deleting")
    .map((doc) => el("option", { value: doc.doc_id, text: doc.name }));
  choice.replaceChildren(el("option", { value: "", text: "— not an edition —" }), ...options);
  choice.value = options.some((o) => o.value === chosen) ? chosen : "";
}

// The corpus table's name cell; a document linked to a previous edition says which.
function nameCell(doc, names) {
  const td = cell(doc.name);
  if (doc.edition_of) {
    td.append(el("div", { class: "edition-of hint", "data-edition-of": doc.edition_of,
      text: `next edition of ${names[doc.edition_of] || doc.edition_of}` }));
  }
  return td;
}

async function refreshCorpus() {
  const data = await api("GET", "/api/documents");
  const json = JSON.stringify(data.documents);
  if (state.shown.corpus === json) return;
  state.shown.corpus = json;
  fillEditionChoice(data.documents);
  state.names = Object.fromEntries(data.documents.map((doc) => [doc.doc_id, doc.name]));
  const rows = data.documents.length ? data.documents.map(corpusRow)
    : [el("tr", {}, el("td", { colspan: 8, class: "hint", text: "no documents yet" }))];
  document.querySelector("#corpus tbody").replaceChildren(...rows);
}

// --- what changed -------------------------------------------------------------------------
// One side of a change: its sentences (one per line), and a link to that issue's PDF at the
// first page ("p. 12" / "pp. 12–13").
function sideCell(side, label) {
  const td = el("td", { class: "side" });
  for (const line of (side.text ? side.text.split("\n") : [])) td.append(el("p", { text: line }));
  if (!side.text) td.append(el("p", { class: "hint", text: "—" }));
  const pages = side.pages.length === 0 ? "" : side.pages.length === 1 ? `p. ${side.pages[0]}`
    : `pp. ${side.pages[0]}–${side.pages[side.pages.length - 1]}`;
  if (pages) {
    td.append(side.url
      ? el("a", { href: side.url, target: "_blank", rel: "noopener", class: "page", text: `${label}, ${pages}` })
      : el("span", { class: "page hint", text: `${label}, ${pages}` }));
  }
  return td;
}

function changeRow(change, data) {
  const section = change.section_before && change.section_after && change.section_before !== change.section_after
    ? `${change.section_before} → ${change.section_after}` : (change.section_after || change.section_before || "");
  const what = el("td", { class: "what" }, el("span", { class: `badge ${change.kind}`, text: change.kind }),
    el("div", { class: "section", text: section }));
  if (change.obligation) what.append(el("div", { class: "flag obligation", text: "obligation" }));
  for (const [before, after] of change.numbers) {
    what.append(el("div", { class: "flag number", text: `${before || "—"} → ${after || "—"}` }));
  }
  return el("tr", { "data-change": change.number, "data-kind": change.kind },
    cell(`C${change.number}`), what, sideCell(change.before, data.previous_label),
    sideCell(change.after, data.label));
}

async function showChanges(docId) {
  let data;
  try {
    data = await api("GET", `/api/documents/${encodeURIComponent(docId)}/changes`);
  } catch (error) {
    show(error.message);
    return;
  }
  const s = data.summary;
  document.getElementById("changes-title").textContent =
    `Changes in ${data.name} (${data.label}) against ${data.previous_label}`;
  document.getElementById("changes-summary").textContent =
    `obligations touched by ${s.obligations_changed}, numbers changed by ${s.numbers_changed}; ` +
    `${s.added} added, ${s.removed} removed, ${s.changed} changed, ${s.moved} moved; ` +
    `${s.unchanged_sections} sections unchanged.`;
  document.getElementById("changes-before").textContent = `before (${data.previous_label})`;
  const edition = data.previous_name !== data.name;  // an edition: name the newer one too
  document.getElementById("changes-after").textContent =
    `after (${edition ? `${data.name} ${data.label}` : data.label})`;
  const rows = data.changes.length ? data.changes.map((c) => changeRow(c, data))
    : [el("tr", {}, el("td", { colspan: 4, class: "hint", text: "nothing changed" }))];
  document.querySelector("#changes-table tbody").replaceChildren(...rows);
  const section = document.getElementById("changes");
  section.hidden = false;
  section.scrollIntoView();
}

function requestRow(request) {
  const path = `/api/requests/${request.id}`;
  const actions = el("td", { class: "actions" });
  if (request.status !== "approved") {
    if (request.source_url) {
      actions.append(el("button", { type: "button", class: "approve",
        onclick: () => act("POST", `${path}/approve`, {}) }, "Approve"));
    }
    actions.append(el("button", { type: "button", class: "danger reject", onclick: () => {
      const reason = prompt(`Why is request #${request.id} rejected?`);
      if (reason && reason.trim()) act("POST", `${path}/reject`, { reason });
    } }, "Reject"));
  }
  const decision = request.status === "approved" ? request.doc_id : request.failure_reason;
  const link = request.source_url
    ? el("td", {}, el("a", { href: request.source_url, rel: "noopener noreferrer", target: "_blank", text: request.source_url }))
    : el("td", { class: "reason", text: "needs a link" });
  return el("tr", { "data-request": request.id, "data-status": request.status },
    cell(request.id), cell(request.title), cell(request.request_count),
    el("td", {}, el("span", { class: `badge ${request.status}`, text: request.status })),
    link, cell(request.reason), cell(decision), actions);
}

async function refreshRequests() {
  const data = await api("GET", "/api/requests");
  const json = JSON.stringify(data.requests);
  if (state.shown.requests === json) return;
  state.shown.requests = json;
  const rows = data.requests.length ? data.requests.map(requestRow)
    : [el("tr", {}, el("td", { colspan: 8, class: "hint", text: "no requests to review" }))];
  document.querySelector("#requests tbody").replaceChildren(...rows);
}

// --- start ---------------------------------------------------------------------------------
function refreshAll() {
  if (!state.config) return;
  Promise.all([refreshBuilds(), refreshTasks(), refreshCorpus(), refreshRequests()])
    .catch((error) => show(error.message));
}

function poll(refresh, every) {
  const tick = () => refresh().catch((error) => show(error.message)).finally(() => setTimeout(tick, every));
  setTimeout(tick, every);
}

async function start() {
  try {
    state.config = await api("GET", "/api/config");
  } catch (error) {
    show(error.message);
    return;
  }
  document.getElementById("limit").textContent =
    `${state.config.suffixes.join(", ")} up to ${bytes(state.config.max_bytes)} each`;
  document.getElementById("builds-window").textContent = `(last ${state.config.hours} hours)`;
  const dagster = document.getElementById("dagster-link");
  dagster.href = state.config.dagster_url;
  dagster.textContent = `Dagster UI (${state.config.dagster_url})`;
  document.getElementById("token-form").hidden = true;
  refreshAll();
  if (state.polling) return;
  state.polling = true;
  poll(refreshBuilds, POLL_MS);
  poll(refreshTasks, POLL_MS);
  poll(refreshCorpus, SLOW_POLL_MS);
  poll(refreshRequests, SLOW_POLL_MS);
}

document.getElementById("token-form").addEventListener("submit", (event) => {
  event.preventDefault();
  state.token = document.getElementById("token").value.trim();
  sessionStorage.setItem("kb-upload-token", state.token);
  show("");
  start();
});
setUpDrop();
start();
