// Keeps a page's live part current: the server says, over server-sent
// events, what changed; the part is fetched again and swapped in place,
// keeping focus and scroll where they were.
(function () {
  const live = document.getElementById("live");
  const status = document.getElementById("live-status");
  if (!window.EventSource) { status.textContent = "not live: reload to update"; return; }
  let pending = null;
  function refresh() {
    pending = null;
    fetch(location.href, { headers: { "X-Fragment": "1" }, cache: "no-store" })
      .then((r) => r.ok ? r.text() : Promise.reject(r.status))
      .then((html) => {
        const focused = document.activeElement && document.activeElement.closest("#live") ? document.activeElement.getAttribute("href") : null;
        live.innerHTML = html;
        live.dataset.updated = String(Date.now());
        if (focused) { const el = live.querySelector('[href="' + CSS.escape(focused) + '"]'); if (el) el.focus(); }
      })
      .catch(() => { status.textContent = "update failed: retrying"; });
  }
  const es = new EventSource("/events");
  es.onopen = () => { status.textContent = "live"; };
  es.onerror = () => { status.textContent = "reconnecting…"; };
  es.addEventListener("change", (e) => {
    if (live && e.data === live.dataset.live && !pending) pending = setTimeout(refresh, 100);
  });
})();
