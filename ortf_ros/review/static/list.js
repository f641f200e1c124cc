// The episode list: filters, sorting by any column, and the doctor's counts as they come.
"use strict";
(function () {
  const body = document.querySelector("table.episodes tbody");
  const rows = Array.from(body.querySelectorAll("tr[data-episode-id]"));
  const byTestId = (id) => document.querySelector(`[data-testid="${id}"]`);
  const task = byTestId("filter-task");
  const outcome = byTestId("filter-outcome");
  const withFindings = byTestId("filter-findings");
  const shown = byTestId("shown-count");
  let sortKey = null;
  let sortUp = true;

  function keyOf(row, name, type) {
    const value = name === "id" ? row.dataset.episodeId : row.dataset[name];
    if (type !== "number") return value || "";
    return value === "" || value === undefined ? Infinity : Number(value);
  }

  function apply() {
    let count = 0;
    for (const row of rows) {
      const visible =
        (!task.value || row.dataset.task === task.value) &&
        (!outcome.value || row.dataset.outcome === outcome.value) &&
        (!withFindings.checked || Number(row.dataset.findings || 0) > 0);
      row.hidden = !visible;
      if (visible) count += 1;
    }
    shown.textContent = `${count} of ${rows.length} shown`;
  }

  function sortBy(th) {
    const name = th.dataset.sort;
    sortUp = sortKey === name ? !sortUp : true;
    sortKey = name;
    const type = th.dataset.type;
    const sorted = rows.slice().sort((a, b) => {
      const x = keyOf(a, name, type);
      const y = keyOf(b, name, type);
      const order = x < y ? -1 : x > y ? 1 : 0;
      return sortUp ? order : -order;
    });
    for (const row of sorted) body.appendChild(row);
    for (const other of document.querySelectorAll("th[data-sort]")) other.removeAttribute("aria-sort");
    th.setAttribute("aria-sort", sortUp ? "ascending" : "descending");
  }

  for (const th of document.querySelectorAll("th[data-sort]")) {
    th.addEventListener("click", () => sortBy(th));
    th.addEventListener("keydown", (event) => {
      if (event.key === "Enter") sortBy(th);
    });
  }
  const deleted = new URLSearchParams(window.location.search).get("deleted");
  if (deleted) {
    const note = document.createElement("p");
    note.dataset.testid = "deleted";
    note.textContent = `Episode ${deleted} was deleted from the dataset.`;
    document.querySelector("header").appendChild(note);
  }
  for (const control of [task, outcome, withFindings]) control.addEventListener("change", apply);
  for (const row of rows) {  // the whole row opens the episode, not only its id
    row.addEventListener("click", (event) => {
      if (event.target.closest("a")) return;
      window.location.href = row.querySelector("a").href;
    });
  }
  apply();

  async function poll() {
    let data;
    try {
      const response = await fetch("/api/findings");
      data = await response.json();
    } catch (error) {
      return;
    }
    let pending = 0;
    for (const row of rows) {
      const counts = data.counts[row.dataset.episodeId];
      const cell = row.querySelector('[data-testid="findings-count"]');
      const failed = data.failed[row.dataset.episodeId];
      if (failed) {
        cell.textContent = "failed";
        cell.title = failed;
        continue;
      }
      if (!counts) {
        pending += 1;
        continue;
      }
      const total = Object.values(counts).reduce((a, b) => a + b, 0);
      row.dataset.findings = String(total);
      cell.textContent = String(total);
      cell.title = Object.entries(counts).map(([k, v]) => `${v} ${k}`).join(", ") || "no findings";
      cell.className = `number findings ${counts.error ? "error" : counts.warning ? "warning" : ""}`;
    }
    apply();
    byTestId("doctor-state").textContent = pending ? `doctor: ${pending} episode(s) to examine` : "";
    if (pending) setTimeout(poll, 1500);
  }
  poll();
})();
