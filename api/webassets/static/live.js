// Live updates for sluice's pages. A build page's log grows as the build
// writes it (polling /ui/builds/<id>/live with the offsets it has); other
// pages that change reload themselves. Without JavaScript the pages reload
// through a <noscript> refresh instead.
(function () {
  "use strict";
  var script = document.currentScript;
  var log = document.getElementById("log");
  if (!log) {
    var secs = parseInt(script.getAttribute("data-refresh"), 10) || 10;
    setTimeout(function () { location.reload(); }, secs * 1000);
    return;
  }
  // The log viewer follows the log itself (log.js).
  if (log.getAttribute("data-final") === "true" || log.hasAttribute("data-viewer")) return;
  var url = log.getAttribute("data-live");

  function section(name) {
    var all = log.querySelectorAll("section.step");
    for (var i = 0; i < all.length; i++) {
      if (all[i].getAttribute("data-step") === name) return all[i];
    }
    var empty = document.getElementById("no-log");
    if (empty) empty.remove();
    var s = document.createElement("section");
    s.className = "step";
    s.setAttribute("data-step", name);
    s.setAttribute("data-next", "0");
    var h = document.createElement("h3");
    h.textContent = name;
    s.appendChild(h);
    s.appendChild(document.createElement("pre"));
    log.appendChild(s);
    return s;
  }

  function offsets() {
    var out = {};
    var all = log.querySelectorAll("section.step");
    for (var i = 0; i < all.length; i++) {
      out[all[i].getAttribute("data-step")] = parseInt(all[i].getAttribute("data-next"), 10) || 0;
    }
    return out;
  }

  function setStatus(status, reason) {
    var badge = document.querySelector("#build-status .status");
    if (badge) {
      badge.textContent = status;
      badge.className = "status s-" + status.toLowerCase();
    }
    var r = document.getElementById("build-reason");
    if (r) r.textContent = reason;
  }

  function poll() {
    fetch(url + "?offsets=" + encodeURIComponent(JSON.stringify(offsets())), { credentials: "same-origin", cache: "no-store" })
      .then(function (resp) {
        if (!resp.ok) throw new Error("HTTP " + resp.status);
        return resp.json();
      })
      .then(function (ans) {
        ans.steps.forEach(function (st) {
          var s = section(st.name);
          if (st.text) s.querySelector("pre").appendChild(document.createTextNode(st.text));
          s.setAttribute("data-next", String(st.next));
        });
        setStatus(ans.status, ans.reason);
        if (ans.final) {
          // The complete page: exit codes, attempts, timings.
          setTimeout(function () { location.reload(); }, 500);
          return;
        }
        setTimeout(poll, 1000);
      })
      .catch(function () { setTimeout(poll, 3000); });
  }
  setTimeout(poll, 1000);
})();
