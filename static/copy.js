// A "Copy" button beside each command on the Test plan page (progressive enhancement: without this
// script the commands are still selectable text, and each box scrolls sideways by keyboard once
// focused, tabindex=0 in the page).
(function () {
  "use strict";
  if (!navigator.clipboard) return;
  document.querySelectorAll("pre.command").forEach(function (pre) {
    var button = document.createElement("button");
    button.type = "button";
    button.className = "secondary copy";
    button.textContent = "Copy";
    var label = pre.getAttribute("aria-label") || "command";
    button.setAttribute("aria-label", "Copy: " + label);
    button.addEventListener("click", function () {
      navigator.clipboard.writeText(pre.textContent).then(
        function () {
          button.textContent = "Copied";
          setTimeout(function () { button.textContent = "Copy"; }, 2000);
        },
        function () {
          button.textContent = "Select and copy by hand";
        }
      );
    });
    pre.parentNode.insertBefore(button, pre);
  });
})();
