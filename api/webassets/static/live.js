// Pages that change reload themselves every data-refresh seconds; a build
// page's log viewer follows the build itself instead (log.js). Without
// JavaScript the pages reload through a <noscript> refresh.
(function () {
  "use strict";
  var script = document.currentScript;
  if (document.getElementById("log")) return;
  var secs = parseInt(script.getAttribute("data-refresh"), 10) || 10;
  setTimeout(function () { location.reload(); }, secs * 1000);
})();
