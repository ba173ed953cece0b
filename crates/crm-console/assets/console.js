// The console's one script. Every form works without it; it adds drag and drop on the board,
// keyboard shortcuts (/ or Ctrl+K: search), a confirmation before delete, and submitting the
// pipeline choice on change. No framework, nothing from elsewhere.
"use strict";
document.documentElement.classList.add("js");

document.addEventListener("keydown", (e) => {
  const search = document.getElementById("global-search");
  if (!search) return;
  const typing = /^(INPUT|TEXTAREA|SELECT)$/.test(document.activeElement.tagName);
  if ((e.key === "k" && (e.ctrlKey || e.metaKey)) || (e.key === "/" && !typing)) {
    e.preventDefault();
    search.focus();
    search.select();
  }
});

document.addEventListener("submit", (e) => {
  const message = e.target.dataset.confirm;
  if (message && !window.confirm(message)) e.preventDefault();
});

document.addEventListener("change", (e) => {
  if (e.target.matches("select[data-autosubmit]")) e.target.form.submit();
});

// Drag a card onto a column: its move form is submitted with that column's stage.
let dragged = null;
document.addEventListener("dragstart", (e) => {
  const card = e.target.closest && e.target.closest("[data-deal]");
  if (!card) return;
  dragged = card;
  e.dataTransfer.effectAllowed = "move";
  e.dataTransfer.setData("text/plain", card.dataset.deal);
});
document.addEventListener("dragover", (e) => {
  const column = e.target.closest && e.target.closest("[data-stage]");
  if (!dragged || !column) return;
  e.preventDefault();
  column.classList.add("drop-target");
});
document.addEventListener("dragleave", (e) => {
  const column = e.target.closest && e.target.closest("[data-stage]");
  if (column) column.classList.remove("drop-target");
});
document.addEventListener("drop", (e) => {
  const column = e.target.closest && e.target.closest("[data-stage]");
  if (!dragged || !column) return;
  e.preventDefault();
  column.classList.remove("drop-target");
  const form = dragged.querySelector("form.move");
  const select = form && form.querySelector("select[name=stage]");
  if (select && select.value !== column.dataset.stage) {
    select.value = column.dataset.stage;
    form.submit();
  }
  dragged = null;
});
