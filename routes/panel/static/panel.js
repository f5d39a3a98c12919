// Lanner's panel: draws the dashboard chart from its JSON and wires the copy buttons. No inline script
// runs (the pages' Content-Security-Policy): everything starts here.
(function () {
  "use strict";

  var COLOURS = { clicks: "#2563eb", conversions: "#16a34a", revenue: "#0891b2", cost: "#dc2626", profit: "#9333ea" };
  var MONEY = { revenue: true, cost: true, profit: true };

  function drawChart() {
    var box = document.getElementById("chart");
    var source = document.getElementById("chart-data");
    if (!box || !source || typeof uPlot === "undefined") return;
    var data = JSON.parse(source.textContent);
    var names = Object.keys(data.series);
    var series = [{}];
    var columns = [data.x];
    names.forEach(function (name) {
      series.push({
        label: name.charAt(0).toUpperCase() + name.slice(1) + (MONEY[name] ? " (" + data.currency + ")" : ""),
        stroke: COLOURS[name] || "#555",
        width: 2,
        scale: MONEY[name] ? "money" : "count",
        value: function (u, v) { return v == null ? "–" : MONEY[name] ? v.toFixed(2) : Math.round(v).toLocaleString(); },
      });
      columns.push(data.series[name]);
    });
    var axes = [{}, { scale: "count" }];
    if (names.some(function (n) { return MONEY[n]; })) axes.push({ scale: "money", side: 1, grid: { show: false } });
    function size() { return { width: Math.max(box.clientWidth, 260), height: box.clientWidth < 500 ? 220 : 300 }; }
    var options = Object.assign(size(), {
      series: series,
      axes: axes,
      scales: { x: { time: true }, count: { range: function (u, min, max) { return [0, Math.max(max, 1)]; } } },
      // The user's timezone, as the buckets are: x is each bucket's first instant.
      tzDate: function (ts) { return uPlot.tzDate(new Date(ts * 1e3), data.timezone === "UTC" ? "Etc/UTC" : data.timezone); },
    });
    var chart = new uPlot(options, columns, box);
    window.addEventListener("resize", function () { chart.setSize(size()); });
  }

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
  });
})();
