// Lanner's panel: draws the dashboard chart from its JSON and wires the copy buttons. No inline script
// runs (the pages' Content-Security-Policy): everything starts here.
(function () {
  "use strict";

  var COLOURS = { clicks: "#2563eb", unique_clicks: "#0d9488", conversions: "#16a34a", revenue: "#0891b2", cost: "#dc2626", profit: "#9333ea" };
  var MONEY = { revenue: true, cost: true, profit: true };
  var dashboardChart = null;

  function chartSize(box) { return { width: Math.max(box.clientWidth, 260), height: box.clientWidth < 500 ? 220 : 300 }; }

  // Drawn at load and again after htmx swaps a refreshed #dashboard in (a new, empty #chart).
  function drawChart() {
    var box = document.getElementById("chart");
    var source = document.getElementById("chart-data");
    if (!box || !source || typeof uPlot === "undefined" || box.childElementCount) return;
    if (dashboardChart) dashboardChart.destroy();
    var data = JSON.parse(source.textContent);
    var names = data.metrics || Object.keys(data.series);
    var series = [{}];
    var columns = [data.x];
    names.forEach(function (name) {
      series.push({
        label: (data.labels ? data.labels[name] : name) + (MONEY[name] ? " (" + data.currency + ")" : ""),
        stroke: COLOURS[name] || "#555",
        width: 2,
        scale: MONEY[name] ? "money" : "count",
        value: function (u, v) { return v == null ? "–" : MONEY[name] ? v.toFixed(2) : Math.round(v).toLocaleString(); },
      });
      columns.push(data.series[name]);
    });
    var axes = [{}];
    if (names.some(function (n) { return !MONEY[n]; })) axes.push({ scale: "count" });
    if (names.some(function (n) { return MONEY[n]; })) axes.push({ scale: "money", side: axes.length > 1 ? 1 : 3, grid: { show: axes.length === 1 } });
    var options = Object.assign(chartSize(box), {
      series: series,
      axes: axes,
      scales: { x: { time: true }, count: { range: function (u, min, max) { return [0, Math.max(max, 1)]; } } },
      // The user's timezone, as the buckets are: x is each bucket's first instant.
      tzDate: function (ts) { return uPlot.tzDate(new Date(ts * 1e3), data.timezone === "UTC" ? "Etc/UTC" : data.timezone); },
    });
    dashboardChart = new uPlot(options, columns, box);
  }

  window.addEventListener("resize", function () {
    var box = document.getElementById("chart");
    if (dashboardChart && box) dashboardChart.setSize(chartSize(box));
  });

  function wireCopyButtons(root) {
    root.querySelectorAll("button.copy").forEach(function (button) {
      button.addEventListener("click", function () {
        var input = button.parentElement.querySelector(".copy-source");
        input.select();
        if (navigator.clipboard) navigator.clipboard.writeText(input.value);
        else document.execCommand("copy");
        button.textContent = "Copied";
        setTimeout(function () { button.textContent = "Copy"; }, 1500);
      });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    drawChart();
    wireCopyButtons(document);
    document.body.addEventListener("htmx:afterSwap", function (event) { wireCopyButtons(event.target); });
    document.body.addEventListener("htmx:afterSettle", drawChart);
  });
})();

// -- editor: streams reordered by drag and drop (saved through the same form the up/down buttons post),
// filter rows added from their <template>, each offer's (and lander's) share of the weights as typed.
(function () {
  "use strict";

  function streamOrder() {
    var items = document.querySelectorAll("ol.streams li[data-stream]");
    return Array.prototype.map.call(items, function (item) { return item.dataset.stream; }).join(",");
  }

  function wireStreamDrag() {
    var form = document.getElementById("stream-order");
    if (!form) return;
    var dragged = null;
    document.querySelectorAll("ol.streams[data-sortable]").forEach(function (list) {
      list.addEventListener("dragstart", function (event) {
        dragged = event.target.closest("li[data-stream]");
        if (!dragged) return;
        dragged.classList.add("dragging");
        event.dataTransfer.effectAllowed = "move";
        event.dataTransfer.setData("text/plain", dragged.dataset.stream);
      });
      list.addEventListener("dragend", function () {
        if (dragged) dragged.classList.remove("dragging");
        dragged = null;
      });
      // A stream moves within its own type only: each type's positions are its own.
      list.addEventListener("dragover", function (event) {
        if (!dragged || dragged.parentNode !== list) return;
        event.preventDefault();
        var over = event.target.closest("li[data-stream]");
        if (!over || over === dragged) return;
        var items = Array.prototype.slice.call(list.children);
        list.insertBefore(dragged, items.indexOf(dragged) < items.indexOf(over) ? over.nextSibling : over);
      });
      list.addEventListener("drop", function (event) {
        if (!dragged || dragged.parentNode !== list) return;
        event.preventDefault();
        var order = streamOrder();
        if (order !== form.elements.order.defaultValue) {
          form.elements.order.value = order;
          form.submit();
        }
      });
    });
  }

  function showHints(row) {
    var select = row.querySelector(".filter-type");
    var option = select.options[select.selectedIndex];
    var value = row.querySelector(".filter-value");
    var key = row.querySelector(".filter-key");
    value.placeholder = option.dataset.hint || "values, comma-separated";
    if (option.dataset.list) value.setAttribute("list", option.dataset.list);
    else value.removeAttribute("list");
    key.hidden = !option.dataset.key && !key.value;
    key.placeholder = option.dataset.key || "";
  }

  function wireFilterBuilder() {
    var rows = document.getElementById("filter-rows");
    var template = document.getElementById("filter-row-template");
    if (!rows || !template) return;
    document.body.classList.add("has-js");
    rows.querySelectorAll("[data-filter-row]").forEach(showHints);
    rows.addEventListener("change", function (event) {
      if (event.target.classList.contains("filter-type")) showHints(event.target.closest("[data-filter-row]"));
    });
    rows.addEventListener("click", function (event) {
      if (event.target.classList.contains("remove-filter")) event.target.closest("[data-filter-row]").remove();
    });
    var add = document.getElementById("add-filter");
    if (!add) return;
    add.hidden = false;
    add.addEventListener("click", function () {
      var row = template.content.firstElementChild.cloneNode(true);
      rows.appendChild(row);
      showHints(row);
      row.querySelector(".filter-type").focus();
    });
  }

  function wireOfferShares(id) {
    var table = document.getElementById(id);
    if (!table) return;
    table.addEventListener("input", function () {
      var inputs = table.querySelectorAll(".offer-weight");
      var total = 0;
      inputs.forEach(function (input) {
        var weight = parseInt(input.value, 10);
        if (weight > 0) total += weight;
      });
      inputs.forEach(function (input) {
        var weight = parseInt(input.value, 10);
        var cell = input.closest("tr").querySelector(".share");
        cell.textContent = input.value.trim() !== "" && weight >= 0 && total ? (weight / total * 100).toFixed(1) + "%" : "–";
      });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    wireStreamDrag();
    wireFilterBuilder();
    wireOfferShares("stream-offers");
    wireOfferShares("stream-landers");
  });
})();

// -- reports -- The report builder's chart (a time series of a day or hour level, else bars of the
// level's first rows as sorted), from the JSON in #report-chart-data; a date typed in means "custom".
(function () {
  "use strict";

  function shorten(label) { return label.length > 16 ? label.slice(0, 15) + "…" : label; }

  function drawReportChart() {
    var box = document.getElementById("report-chart");
    var source = document.getElementById("report-chart-data");
    if (!box || !source || typeof uPlot === "undefined") return;
    var data = JSON.parse(source.textContent);
    if (!data.values.length) {
      box.classList.add("chart-empty");
      box.textContent = "Nothing to chart in this period.";
      return;
    }
    function format(u, v) { return v == null ? "–" : data.is_money ? v.toFixed(2) : Math.round(v * 10) / 10 + ""; }
    var metric = { label: data.label, stroke: "#2563eb", fill: "rgba(37, 99, 235, 0.25)", width: 2, value: format };
    var range = function (u, min, max) { return [Math.min(0, min), Math.max(max, 1)]; };
    var options, columns;
    if (data.kind === "time") {
      columns = [data.x, data.values];
      options = {
        series: [{}, metric],
        scales: { x: { time: true }, y: { range: range } },
        // The user's timezone, as the buckets are (as the dashboard's chart): x is each bucket's first instant.
        tzDate: function (ts) { return uPlot.tzDate(new Date(ts * 1e3), data.timezone === "UTC" ? "Etc/UTC" : data.timezone); },
      };
    } else {
      var x = data.values.map(function (_, i) { return i; });
      columns = [x, data.values];
      metric.paths = uPlot.paths.bars({ size: [0.6, 80] });
      metric.points = { show: false };
      options = {
        series: [{ label: data.group, value: function (u, i) { return i == null ? "" : data.labels[i]; } }, metric],
        scales: { x: { time: false, range: function () { return [-0.5, x.length - 0.5]; } }, y: { range: range } },
        axes: [
          {
            splits: function () { return x; },
            values: function (u, splits) { return splits.map(function (i) { return shorten(data.labels[i] || ""); }); },
            rotate: x.length > 5 ? -25 : 0,
            size: x.length > 5 ? 80 : 40,
            grid: { show: false },
          },
          {},
        ],
      };
    }
    function size() { return { width: Math.max(box.clientWidth, 260), height: box.clientWidth < 500 ? 220 : 280 }; }
    var chart = new uPlot(Object.assign(size(), options), columns, box);
    window.addEventListener("resize", function () { chart.setSize(size()); });
  }

  function customOnDate() {
    var period = document.getElementById("period");
    ["from", "to"].forEach(function (id) {
      var input = document.getElementById(id);
      if (period && input && document.getElementById("builder")) {
        input.addEventListener("change", function () { if (input.value) period.value = "custom"; });
      }
    });
  }

  // The ticked rows' time series (#series-chart-data): one line a row, of the metric #series-metric names.
  var SERIES_COLOURS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#db2777", "#65a30d", "#4f46e5", "#854d0e"];
  function drawSeriesChart() {
    var box = document.getElementById("series-chart");
    var source = document.getElementById("series-chart-data");
    var choice = document.getElementById("series-metric");
    if (!box || !source || !choice || typeof uPlot === "undefined") return;
    var data = JSON.parse(source.textContent);
    var chart = null;
    function size() { return { width: Math.max(box.clientWidth, 260), height: box.clientWidth < 500 ? 220 : 280 }; }
    function draw() {
      var metric = data.metrics.filter(function (m) { return m.name === choice.value; })[0] || data.metrics[0];
      var series = [{}];
      var columns = [data.x];
      data.lines.forEach(function (line, i) {
        series.push({
          label: line.label,
          stroke: SERIES_COLOURS[i % SERIES_COLOURS.length],
          width: 2,
          value: function (u, v) { return v == null ? "–" : metric.is_money ? v.toFixed(2) : metric.is_percent ? v.toFixed(1) + " %" : Math.round(v).toLocaleString(); },
        });
        columns.push(line.values[metric.name]);
      });
      if (chart) chart.destroy();
      box.dataset.metric = metric.name;
      chart = new uPlot(Object.assign(size(), {
        series: series,
        axes: [{}, { label: metric.label }],
        scales: { x: { time: true } },
        // The user's timezone, as the buckets are: x is each bucket's first instant.
        tzDate: function (ts) { return uPlot.tzDate(new Date(ts * 1e3), data.timezone === "UTC" ? "Etc/UTC" : data.timezone); },
      }), columns, box);
    }
    choice.addEventListener("change", draw);
    window.addEventListener("resize", function () { if (chart) chart.setSize(size()); });
    draw();
  }

  document.addEventListener("DOMContentLoaded", function () {
    drawReportChart();
    drawSeriesChart();
    customOnDate();
  });
})();

// -- extras: a button with data-confirm (bulk archive, removing a postback target) asks first. One
// listener on the document, so buttons htmx swaps in later are covered too.
(function () {
  "use strict";
  document.addEventListener("click", function (event) {
    var button = event.target.closest ? event.target.closest("button[data-confirm]") : null;
    if (button && !window.confirm(button.getAttribute("data-confirm"))) event.preventDefault();
  });
})();

// -- phone: the nav is one scrolling row there (panel.css); show the current page's link in it.
(function () {
  "use strict";
  document.addEventListener("DOMContentLoaded", function () {
    var nav = document.querySelector(".top nav");
    var current = nav && nav.querySelector("a[aria-current]");
    if (!current || nav.scrollWidth <= nav.clientWidth) return;
    // scrollLeft, not scrollIntoView: that would scroll the page too.
    nav.scrollLeft = current.offsetLeft - nav.offsetLeft - (nav.clientWidth - current.offsetWidth) / 2;
  });
})();

// -- column sets: ticking a row (or unticking it) asks for the total without the ticked rows at once;
// without a script the form's button does. The set picker uses its set as soon as one is chosen.
(function () {
  "use strict";
  document.addEventListener("change", function (event) {
    var target = event.target;
    if (target.classList && target.classList.contains("subtract-row")) {
      var form = document.getElementById("subtract-form");
      if (form) form.requestSubmit();
    } else if (target.id === "column-set" && target.value) {
      target.form.requestSubmit();
    }
  });
})();
