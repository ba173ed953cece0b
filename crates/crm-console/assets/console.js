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
  if (e.target.matches("[data-autosubmit]")) e.target.form.submit();
});

// Moving a card: the board's one move form, filled for the card. Dropped on a column, the form
// is sent with that column's stage; the card's Move button opens it in a dialog instead.
const moveForm = () => document.getElementById("move-form");
function fillMove(card) {
  const form = moveForm();
  form.elements.deal.value = card.dataset.deal;
  form.elements.version.value = card.dataset.version;
  const column = card.closest("[data-stage]");
  if (column) form.elements.stage.value = column.dataset.stage;
  const title = card.querySelector(".title");
  document.getElementById("move-deal-title").textContent = title ? title.textContent : "a deal";
  return form;
}
document.addEventListener("click", (e) => {
  const button = e.target.closest && e.target.closest("[data-move]");
  if (button && moveForm()) {
    fillMove(button.closest("[data-deal]"));
    document.getElementById("move-dialog").showModal();
    moveForm().elements.stage.focus();
  }
  if (e.target.matches && e.target.matches("[data-close]")) e.target.closest("dialog").close();
});

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
  const from = dragged.closest("[data-stage]");
  if (moveForm() && from !== column) {
    const form = fillMove(dragged);
    form.elements.stage.value = column.dataset.stage;
    form.submit();
  }
  dragged = null;
});

// Settings: imports. A page with an element marked `data-refresh="<seconds>"` (a running
// import's progress) reloads itself after that long; the server stops marking it once the
// import ends, so the reloads stop too.
(() => {
  const marked = document.querySelector("[data-refresh]");
  if (!marked) return;
  const seconds = Math.max(1, Number(marked.dataset.refresh) || 2);
  window.setTimeout(() => window.location.reload(), seconds * 1000);
})();
