// The log viewer of a build page (api/web_logs.go): earlier pages on
// demand, search across the whole log, links to any line, and a live
// follow that resumes from the offsets it has after a lost connection.
// Log text only ever reaches the page as textContent; colours come as CSS
// class names the server picked from a fixed set.
(function () {
  "use strict";
  var log = document.getElementById("log");
  if (!log || !log.hasAttribute("data-viewer")) return;
  var base = log.getAttribute("data-base");
  var followStatus = document.getElementById("log-follow");

  function sections() { return log.querySelectorAll("details.step"); }

  function byIndex(i) { return document.getElementById("S" + i); }

  function byName(name) {
    var all = sections();
    for (var i = 0; i < all.length; i++) {
      if (all[i].getAttribute("data-step") === name) return all[i];
    }
    return null;
  }

  function stepURL(s) {
    return base + "/log/" + encodeURIComponent(s.getAttribute("data-step"));
  }

  function lineEl(index, l) {
    var li = document.createElement("li");
    li.id = "L" + index + "-" + l.n;
    li.setAttribute("data-off", String(l.off));
    if (l.partial) li.className = "partial";
    var a = document.createElement("a");
    a.className = "ln";
    a.href = "#" + li.id;
    a.textContent = String(l.n);
    li.appendChild(a);
    if (l.time) {
      var t = document.createElement("time");
      t.setAttribute("datetime", l.iso);
      t.title = l.iso;
      t.textContent = l.time;
      li.appendChild(t);
    }
    var tx = document.createElement("span");
    tx.className = "tx";
    l.spans.forEach(function (sp) {
      if (sp.c) {
        var e = document.createElement("span");
        e.className = sp.c;
        e.textContent = sp.t;
        tx.appendChild(e);
      } else {
        tx.appendChild(document.createTextNode(sp.t));
      }
    });
    li.appendChild(tx);
    return li;
  }

  function newSection(page) {
    var empty = document.getElementById("no-log");
    if (empty) empty.remove();
    var d = document.createElement("details");
    d.className = "step";
    d.id = "S" + page.index;
    d.open = true;
    d.setAttribute("data-step", page.step);
    d.setAttribute("data-index", String(page.index));
    d.setAttribute("data-start", String(page.start));
    d.setAttribute("data-next", String(page.start));
    var sum = document.createElement("summary");
    var name = document.createElement("span");
    name.className = "step-name";
    name.textContent = page.step;
    sum.appendChild(name);
    sum.appendChild(document.createTextNode(" "));
    var raw = document.createElement("a");
    raw.className = "raw";
    raw.href = base + "/log/" + encodeURIComponent(page.step) + "/raw";
    raw.setAttribute("download", "");
    raw.textContent = "raw";
    sum.appendChild(raw);
    d.appendChild(sum);
    if (page.start > 0) d.appendChild(earlierButton());
    d.appendChild(document.createElement("ol")).className = "lines";
    log.appendChild(d);
    return d;
  }

  function earlierButton() {
    var b = document.createElement("button");
    b.type = "button";
    b.className = "earlier";
    b.textContent = "load earlier lines";
    return b;
  }

  // append adds a page's lines at the end of a section (a partial last
  // line is replaced by what it became).
  function append(s, page) {
    var ol = s.querySelector("ol.lines");
    var index = s.getAttribute("data-index");
    var old = ol.querySelectorAll("li.partial");
    for (var i = 0; i < old.length; i++) old[i].remove();
    page.lines.forEach(function (l) { ol.appendChild(lineEl(index, l)); });
    s.setAttribute("data-next", String(page.next));
  }

  // prepend adds a page's lines before the first line shown.
  function prepend(s, page) {
    var ol = s.querySelector("ol.lines");
    var index = s.getAttribute("data-index");
    var start = parseInt(s.getAttribute("data-start"), 10) || 0;
    var frag = document.createDocumentFragment();
    page.lines.forEach(function (l) {
      if (l.off < start) frag.appendChild(lineEl(index, l));
    });
    ol.insertBefore(frag, ol.firstChild);
    s.setAttribute("data-start", String(Math.min(page.start, start)));
    var b = s.querySelector("button.earlier");
    if (page.start === 0 && b) b.remove();
  }

  function getJSON(url) {
    return fetch(url, { credentials: "same-origin", cache: "no-store" }).then(function (resp) {
      return resp.json().then(function (body) {
        if (!resp.ok) throw new Error(body.error || ("HTTP " + resp.status));
        return body;
      });
    });
  }

  function earlier(s, line) {
    var start = parseInt(s.getAttribute("data-start"), 10) || 0;
    var url = stepURL(s) + "?before=" + start + (line ? "&line=" + line : "");
    return getJSON(url).then(function (page) { prepend(s, page); });
  }

  log.addEventListener("click", function (ev) {
    var b = ev.target.closest("button.earlier");
    if (!b) return;
    b.disabled = true;
    earlier(b.closest("details.step")).then(function () { b.disabled = false; }, function () { b.disabled = false; });
  });

  // ---- links to lines ---------------------------------------------------

  function showLine() {
    var m = /^#L(\d+)-(\d+)$/.exec(location.hash);
    if (!m) return;
    var s = byIndex(m[1]);
    if (!s) return;
    var id = "L" + m[1] + "-" + m[2];
    var tries = 0;
    function reveal() {
      var li = document.getElementById(id);
      if (!li) {
        var start = parseInt(s.getAttribute("data-start"), 10) || 0;
        if (start === 0 || tries++ > 20) return;
        earlier(s, m[2]).then(reveal);
        return;
      }
      s.open = true;
      var prev = log.querySelectorAll("li.hl");
      for (var i = 0; i < prev.length; i++) prev[i].classList.remove("hl");
      li.classList.add("hl");
      li.scrollIntoView({ block: "center" });
    }
    reveal();
  }
  window.addEventListener("hashchange", showLine);
  showLine();

  // ---- search -------------------------------------------------------------

  var form = document.getElementById("log-search");
  var results = document.getElementById("log-results");
  form.addEventListener("submit", function (ev) {
    ev.preventDefault();
    var q = document.getElementById("log-q").value;
    if (!q.trim()) return;
    getJSON(form.getAttribute("action") + "?q=" + encodeURIComponent(q)).then(function (ans) {
      results.textContent = "";
      var head = document.createElement("p");
      head.textContent = ans.matches.length + (ans.more ? "+" : "") + " line" + (ans.matches.length === 1 ? "" : "s") + " match " + JSON.stringify(ans.query);
      results.appendChild(head);
      var ul = document.createElement("ul");
      ans.matches.forEach(function (m) {
        var li = document.createElement("li");
        var a = document.createElement("a");
        a.href = "#L" + m.index + "-" + m.n;
        a.textContent = m.step + ":" + m.n;
        li.appendChild(a);
        var code = document.createElement("code");
        code.textContent = m.text;
        li.appendChild(document.createTextNode(" "));
        li.appendChild(code);
        ul.appendChild(li);
      });
      results.appendChild(ul);
      results.hidden = false;
      var lq = q.toLowerCase();
      var lines = log.querySelectorAll("li");
      for (var i = 0; i < lines.length; i++) {
        var tx = lines[i].querySelector(".tx");
        lines[i].classList.toggle("hit", !!tx && tx.textContent.toLowerCase().indexOf(lq) >= 0);
      }
    }, function (err) {
      results.textContent = "search failed: " + err.message;
      results.hidden = false;
    });
  });

  // ---- live follow ------------------------------------------------------

  if (log.getAttribute("data-final") === "true") return;

  function cursor() {
    var out = {};
    var all = sections();
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

  var delay = 1000;
  function follow() {
    getJSON(base + "/log-follow?cursor=" + encodeURIComponent(JSON.stringify(cursor()))).then(function (ans) {
      ans.steps.forEach(function (page) {
        var s = byName(page.step) || newSection(page);
        append(s, page);
      });
      setStatus(ans.status, ans.reason);
      followStatus.textContent = "following";
      followStatus.className = "follow on";
      delay = 1000;
      if (ans.final) {
        // The complete page: exit codes, durations, attempts.
        setTimeout(function () { location.reload(); }, 500);
        return;
      }
      setTimeout(follow, delay);
    }, function () {
      // Lost: try again, later each time, from the offsets we have.
      followStatus.textContent = "reconnecting…";
      followStatus.className = "follow off";
      delay = Math.min(delay * 2, 5000);
      setTimeout(follow, delay);
    });
  }
  setTimeout(follow, 1000);
})();
