// The live chart of send and consume TPS on the cluster page. It polls
// /api/stats (every broker's message totals), turns two polls into rates
// and draws the last 60 polls on a canvas. No inline script: the page's
// Content-Security-Policy allows only this file.
(function () {
  "use strict";
  var canvas = document.getElementById("tps-chart");
  if (!canvas) { return; }
  var source = canvas.getAttribute("data-source");
  var every = Number(canvas.getAttribute("data-every")) || 2000, keep = 60;
  var points = [], last = null;

  function totals(pt) {
    var put = 0, get = 0;
    pt.brokers.forEach(function (b) { put += b.put; get += b.get; });
    return { time: pt.time, put: put, get: get };
  }

  // The brokers table's stored and pulled totals follow each poll. Rows are
  // matched by comparing attributes, never by building a selector from an
  // address; cells get textContent, never markup.
  // Its in and out TPS become each broker's rate between two polls.
  var lastByAddr = {};
  function updateTable(pt) {
    var rows = document.querySelectorAll("#brokers tr[data-addr]");
    pt.brokers.forEach(function (b) {
      var prev = Object.prototype.hasOwnProperty.call(lastByAddr, b.addr) ? lastByAddr[b.addr] : null;
      lastByAddr[b.addr] = { time: pt.time, put: b.put, get: b.get };
      rows.forEach(function (tr) {
        if (tr.getAttribute("data-addr") !== b.addr) { return; }
        setText(tr, ".put-total", String(b.put));
        setText(tr, ".get-total", String(b.get));
        if (prev && pt.time > prev.time) {
          var secs = (pt.time - prev.time) / 1000;
          setText(tr, ".in-tps", Math.max(0, (b.put - prev.put) / secs).toFixed(2));
          setText(tr, ".out-tps", Math.max(0, (b.get - prev.get) / secs).toFixed(2));
        }
      });
    });
  }

  function setText(tr, sel, v) {
    var el = tr.querySelector(sel);
    if (el) { el.textContent = v; }
  }

  function poll() {
    fetch(source, { cache: "no-store" }).then(function (r) {
      if (!r.ok) { throw new Error(r.status); }
      return r.json();
    }).then(function (pt) {
      updateTable(pt);
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
    canvas.setAttribute("data-points", String(points.length));
    document.getElementById("tps-now").textContent = "now: " + p.send.toFixed(1) + " sent/s, " + p.consume.toFixed(1) + " consumed/s";
  }

  function line(key, color, top, pad, w, h, ctx) {
    var xy = points.map(function (p, i) {
      return { x: pad + (w - pad - 8) * (keep - points.length + i) / (keep - 1), y: pad / 2 + (h - pad) * (1 - p[key] / top) };
    });
    ctx.strokeStyle = color; ctx.lineWidth = 2; ctx.beginPath();
    xy.forEach(function (q, i) {
      if (i === 0) { ctx.moveTo(q.x, q.y); } else { ctx.lineTo(q.x, q.y); }
    });
    ctx.stroke();
    // A dot on each point, so the first one shows before there is a line.
    ctx.fillStyle = color;
    xy.forEach(function (q) {
      ctx.beginPath(); ctx.arc(q.x, q.y, 2.5, 0, 2 * Math.PI); ctx.fill();
    });
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
