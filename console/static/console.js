// The live chart of send and consume TPS on the cluster page. It polls
// /api/stats (every broker's message totals), turns two polls into rates
// and draws the last two minutes on a canvas. No inline script: the page's
// Content-Security-Policy allows only this file.
(function () {
  "use strict";
  var canvas = document.getElementById("tps-chart");
  if (!canvas) { return; }
  var source = canvas.getAttribute("data-source");
  var every = 2000, keep = 60;
  var points = [], last = null;

  function totals(pt) {
    var put = 0, get = 0;
    pt.brokers.forEach(function (b) { put += b.put; get += b.get; });
    return { time: pt.time, put: put, get: get };
  }

  function poll() {
    fetch(source, { cache: "no-store" }).then(function (r) {
      if (!r.ok) { throw new Error(r.status); }
      return r.json();
    }).then(function (pt) {
      var now = totals(pt);
      if (last && now.time > last.time) {
        var secs = (now.time - last.time) / 1000;
        points.push({ send: Math.max(0, (now.put - last.put) / secs), consume: Math.max(0, (now.get - last.get) / secs) });
        if (points.length > keep) { points.shift(); }
        draw();
      }
      last = now;
    }).catch(function () { /* the next poll tries again */ });
  }

  function draw() {
    var ctx = canvas.getContext("2d"), w = canvas.width, h = canvas.height, pad = 40;
    ctx.clearRect(0, 0, w, h);
    var top = 1;
    points.forEach(function (p) { top = Math.max(top, p.send, p.consume); });
    top = niceCeil(top);
    ctx.strokeStyle = "#e4e7ec"; ctx.fillStyle = "#667085"; ctx.font = "11px sans-serif"; ctx.lineWidth = 1;
    for (var i = 0; i <= 4; i++) {
      var y = pad / 2 + (h - pad) * i / 4;
      ctx.beginPath(); ctx.moveTo(pad, y); ctx.lineTo(w - 8, y); ctx.stroke();
      ctx.fillText(String(Math.round(top * (4 - i) / 4)), 4, y + 4);
    }
    line("send", "#1f6feb", top, pad, w, h, ctx);
    line("consume", "#12a150", top, pad, w, h, ctx);
    var p = points[points.length - 1];
    document.getElementById("tps-now").textContent = "now: " + p.send.toFixed(1) + " sent/s, " + p.consume.toFixed(1) + " consumed/s";
  }

  function line(key, color, top, pad, w, h, ctx) {
    ctx.strokeStyle = color; ctx.lineWidth = 2; ctx.beginPath();
    points.forEach(function (p, i) {
      var x = pad + (w - pad - 8) * (keep - points.length + i) / (keep - 1);
      var y = pad / 2 + (h - pad) * (1 - p[key] / top);
      if (i === 0) { ctx.moveTo(x, y); } else { ctx.lineTo(x, y); }
    });
    ctx.stroke();
  }

  function niceCeil(v) {
    var mag = Math.pow(10, Math.floor(Math.log10(v)));
    var steps = [1, 2, 5, 10];
    for (var i = 0; i < steps.length; i++) { if (v <= steps[i] * mag) { return steps[i] * mag; } }
    return 10 * mag;
  }

  poll();
  setInterval(poll, every);
})();
