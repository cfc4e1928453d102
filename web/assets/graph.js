// Pan and zoom for the entity graph (/graph): drag to pan, wheel or buttons to zoom, by
// rewriting the SVG's viewBox. Loaded as a file: the page's CSP allows no inline script.
(function () {
  "use strict";
  var svg = document.getElementById("graph");
  if (!svg) { return; }
  var home = svg.getAttribute("data-viewbox").split(" ").map(Number);
  var box = home.slice();
  function apply() { svg.setAttribute("viewBox", box.join(" ")); }
  // Zoom by `factor` (below 1 zooms in) around the drawing point (cx, cy).
  function zoom(factor, cx, cy) {
    var w = box[2] * factor, h = box[3] * factor;
    if (w < home[2] / 20 || w > home[2] * 10) { return; }
    box = [cx - (cx - box[0]) * factor, cy - (cy - box[1]) * factor, w, h];
    apply();
  }
  function centre() { return [box[0] + box[2] / 2, box[1] + box[3] / 2]; }
  function point(ev) {
    var r = svg.getBoundingClientRect();
    return [box[0] + (ev.clientX - r.left) / r.width * box[2],
            box[1] + (ev.clientY - r.top) / r.height * box[3]];
  }
  document.getElementById("zoom-in").addEventListener("click", function () {
    var c = centre(); zoom(0.8, c[0], c[1]);
  });
  document.getElementById("zoom-out").addEventListener("click", function () {
    var c = centre(); zoom(1.25, c[0], c[1]);
  });
  document.getElementById("zoom-reset").addEventListener("click", function () {
    box = home.slice(); apply();
  });
  svg.addEventListener("wheel", function (ev) {
    ev.preventDefault();
    var p = point(ev);
    zoom(ev.deltaY < 0 ? 0.9 : 1.1, p[0], p[1]);
  }, { passive: false });
  var drag = null;
  svg.addEventListener("pointerdown", function (ev) {
    // A press on an entity is a click on its link, not the start of a pan.
    if (ev.target.closest && ev.target.closest("a")) { return; }
    drag = { x: ev.clientX, y: ev.clientY, box: box.slice() };
    svg.setPointerCapture(ev.pointerId);
    svg.classList.add("panning");
  });
  svg.addEventListener("pointermove", function (ev) {
    if (!drag) { return; }
    var r = svg.getBoundingClientRect();
    box[0] = drag.box[0] - (ev.clientX - drag.x) / r.width * box[2];
    box[1] = drag.box[1] - (ev.clientY - drag.y) / r.height * box[3];
    apply();
  });
  function end() { drag = null; svg.classList.remove("panning"); }
  svg.addEventListener("pointerup", end);
  svg.addEventListener("pointercancel", end);
}());
