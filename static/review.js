// The review's approval form: the GPUs, billing and rate are what the review computed (read-only
// fields); the whole-term preview follows the term as it is typed, and the approve button says what
// it will record. Choosing another trial in the select makes the form name that trial and the
// button say that trial's action (the words the server computed for it); the reservation fields
// shown belong to the trial the page was loaded with, so they are set aside (disabled: not sent)
// for another trial, whose computed reservation is then recorded at the default term.
// Progressive enhancement: without this script, choosing a trial is a step ("Show this trial's
// approval") that reloads the form, and the server computes the same figures after a submit.
//
// The arithmetic mirrors the server's (server/review/model.rs): monthly = round(count × rate ×
// 730, 2 places; rust_decimal's round_dp rounds a half to the even cent), whole term = monthly ×
// months. Money is exact there, so
// it is exact here too: amounts are BigInt hundred-thousandths of a cent, never floats.
(function () {
  "use strict";
  var form = document.getElementById("approval-form");
  if (!form) return;
  var fieldset = form.querySelector("fieldset.reservation");
  var monthly = document.getElementById("monthly-cost");
  var term = document.getElementById("term-cost");
  var button = document.getElementById("approve-button");
  var select = document.getElementById("trial");
  var chosen = document.getElementById("trial-chosen");
  var named = document.querySelector("#trial-named strong");
  var loadedTrial = form.getAttribute("data-trial");

  // The trial chosen in the select is the one the form approves and the button names.
  function chooseTrial() {
    var option = select.options[select.selectedIndex];
    if (!option) return;
    if (chosen) chosen.value = option.value;
    if (named) named.textContent = "“" + option.getAttribute("data-name") + "”";
    var comparison = document.getElementById("reservation-comparison");
    if (comparison) comparison.textContent = option.getAttribute("data-comparison") || "";
    var own = option.value === loadedTrial;
    if (fieldset) {
      fieldset.disabled = !own;
      fieldset.hidden = !own;
    }
    if (button) {
      button.setAttribute("data-trial-name", option.getAttribute("data-name") || "");
      button.textContent = option.getAttribute("data-approve") || button.textContent;
    }
    // An override is of the loaded trial's computed action: choosing another trial sets it aside
    // (its form after "Show this trial's approval" offers that trial's).
    var override = document.getElementById("override");
    if (override) override.hidden = !own;
    // The loaded trial's words follow the term typed in its reservation fields.
    if (own && fieldset && monthly) update();
  }

  // The override button says the action chosen in the override select.
  var overrideSelect = document.getElementById("override-decision");
  var overrideButton = document.getElementById("override-button");
  function overrideWords() {
    if (!overrideSelect || !overrideButton) return;
    overrideButton.textContent =
      "Approve " + overrideSelect.value + " instead of the computed " + overrideButton.getAttribute("data-computed") +
      " — trial “" + overrideButton.getAttribute("data-trial-name") + "”";
  }
  if (overrideSelect) {
    overrideSelect.addEventListener("change", overrideWords);
    overrideWords();
    // Choosing applies at once: the reload step is for pages without this script.
    var showOverride = document.getElementById("show-override");
    if (showOverride) showOverride.hidden = true;
  }

  if (select) {
    select.addEventListener("change", chooseTrial);
    // Choosing applies at once: the reload step is for pages without this script.
    var show = document.getElementById("show-trial");
    if (show) show.hidden = true;
    // A select the browser restored from an earlier visit names its trial too.
    if (select.value !== loadedTrial) chooseTrial();
  }
  if (!fieldset || !monthly) return;
  var currency = fieldset.getAttribute("data-currency") || "";
  var HOURS_PER_MONTH = 730n;
  var SCALE = 12; // decimal places kept before rounding to cents

  function input(name) {
    return form.querySelector("[name='reservation." + name + "']");
  }

  // "2.4875" → 2487500000000n (× 10^12); null when it is not a plain decimal.
  function decimal(text) {
    var m = /^\s*(\d{1,12})(?:\.(\d{1,12}))?\s*$/.exec(text);
    if (!m) return null;
    var frac = (m[2] || "").padEnd(SCALE, "0");
    return BigInt(m[1]) * 10n ** BigInt(SCALE) + BigInt(frac);
  }

  function whole(text, max) {
    var m = /^\s*(\d{1,6})\s*$/.exec(text);
    if (!m) return null;
    var n = Number(m[1]);
    return n >= 1 && n <= max ? n : null;
  }

  // Cents from a value × 10^12, a half rounded to the even cent (as Decimal::round_dp).
  function cents(scaled) {
    var unit = 10n ** BigInt(SCALE - 2);
    var q = scaled / unit;
    var twice = (scaled % unit) * 2n;
    if (twice > unit || (twice === unit && q % 2n === 1n)) q += 1n;
    return q;
  }

  // 1518400n → "15,184"; 1454160n → "14,541.60" (as money::sum).
  function sum(c) {
    var units = (c / 100n).toString().replace(/\B(?=(\d{3})+(?!\d))/g, ",");
    var rest = c % 100n;
    return rest === 0n ? units : units + "." + rest.toString().padStart(2, "0");
  }

  // "1 month", "12 months" (as model::months).
  function spell(n) {
    return n === 1 ? "1 month" : n + " months";
  }

  function update() {
    var count = whole(input("count").value, 4096);
    var rate = decimal(input("rate_per_gpu_hour").value);
    var months = whole(input("term_months").value, 60);
    var gpu = input("gpu").value.trim();
    if (count === null || rate === null) {
      monthly.textContent = "needs a count and a rate per GPU-hour";
      if (term) term.textContent = "";
      return;
    }
    var perMonth = cents(BigInt(count) * rate * HOURS_PER_MONTH);
    monthly.textContent = sum(perMonth) + " " + currency + " a month";
    if (term) {
      term.textContent = months === null ? "" : sum(perMonth * BigInt(months)) + " " + currency + " over " + spell(months);
    }
    if (button && months !== null && gpu) {
      var verb = button.getAttribute("data-verb");
      var trialName = button.getAttribute("data-trial-name") || "";
      if (verb) {
        button.textContent =
          "Approve: " + verb + " " + count + " × " + gpu + " for " + spell(months) + " — trial “" + trialName + "”";
      }
    }
  }

  ["count", "rate_per_gpu_hour", "term_months", "gpu"].forEach(function (name) {
    var el = input(name);
    if (el) el.addEventListener("input", update);
  });
})();
