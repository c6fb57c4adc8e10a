// Loaded before RequireJS and the ipywidgets HTML embed manager on pages with stored widgets (nb_ipywidgets_js
// in _config.yml); `make assets` copies it next to them into _static/_vendor/.
(function () {
  "use strict";
  // 1. The embed manager finds its fonts relative to this folder, not relative to the page.
  //    The bundle takes its public path from the RequireJS module URL of
  //    "@jupyter-widgets/html-manager/dist/libembed-amd", so map that module folder here (a global `require`
  //    object defined before require.js loads is its configuration).
  var src = document.currentScript && document.currentScript.src;
  if (src) {
    var dist = src.replace(/[^/]*$/, "") + "html-manager/";
    window.__jupyter_widgets_assets_path__ = dist;
    if (typeof window.require === "undefined") {
      window.require = { paths: { "@jupyter-widgets/html-manager/dist": dist.replace(/\/$/, "") } };
    }
  }
  // 2. The embed manager typesets widget labels with the MathJax 2 API (MathJax.Hub.Queue); the book
  //    loads MathJax 3, so route those calls to MathJax 3's typesetPromise.
  function installHub() {
    var mj = window.MathJax;
    if (!mj || mj.Hub || !mj.version) return;
    mj.Hub = {
      Queue: function (command) {
        var element = Array.isArray(command) ? command[2] : null;
        var ready = (mj.startup && mj.startup.promise) || Promise.resolve();
        ready.then(function () {
          return mj.typesetPromise ? mj.typesetPromise(element ? [element] : undefined) : null;
        }).catch(function (err) { console.warn("MathJax typeset of a widget failed", err); });
      },
    };
  }
  installHub();
  document.addEventListener("DOMContentLoaded", installHub);
})();
