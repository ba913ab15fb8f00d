// The timeline page of `muse view` (the last of its scripts, after view/format.js and
// view/panels.js): the lanes, the marks along time, the axis, the links from a report to its
// delivery, the charts, zoom and pan, live updates. Every text from the log is put in with
// textContent or as a property, never parsed as markup.
;(() => {
  const { $, el, svg, inflate, fmtInt, fmtCost, two } = globalThis.MuseView
  // ------------------------------------------------------------------------------------------
  // state

  /** @type {any} */
  let S
  /** marks: [id, lane, kind, start, end, status, label, files, link] */
  let marks = []
  const indexOf = new Map()
  let byLane = []
  let v0 = 0
  let v1 = 1
  let selected = -1
  let query = ""
  let hits = null
  const SPAN_KINDS = new Set(["turn", "task", "model", "tool", "approval", "rewind"])
  const BAND_KINDS = new Set(["turn", "task"])

  const clock = (t) => {
    const d = new Date(S.meta.t0 + t)
    return `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}`
  }
  const kindOf = (m) => S.kinds[m[2]]
  const statusOf = (m) => S.statuses[m[5]]
  const endOf = (m) => (m[4] < 0 ? S.meta.last : m[4])
  const rowOf = (m) => {
    const k = kindOf(m)
    return BAND_KINDS.has(k) ? 0 : SPAN_KINDS.has(k) ? 1 : 2
  }

  const panels = globalThis.MuseView.panels({
    get S() {
      return S
    },
    get marks() {
      return marks
    },
    get indexOf() {
      return indexOf
    },
    get selected() {
      return selected
    },
    set selected(id) {
      selected = id
    },
    get query() {
      return query
    },
    get hits() {
      return hits
    },
    set hits(h) {
      hits = h
    },
    kindOf,
    statusOf,
    endOf,
    clock,
    redraw: () => redraw()
  })

  const index = () => {
    indexOf.clear()
    marks.forEach((m, i) => {
      indexOf.set(m[0], i)
    })
    byLane = S.lanes.map(() => [[], [], []])
    for (const m of marks) byLane[m[1]]?.[rowOf(m)].push(m)
    for (const rows of byLane) for (const r of rows) r.sort((a, b) => a[3] - b[3] || a[0] - b[0])
  }

  // ------------------------------------------------------------------------------------------
  // layout

  const body = document.body
  const build = () => {
    body.textContent = ""
    const head = el("header", "head")
    head.id = "head"
    const h1 = el("h1", "", S.meta.title || S.meta.session)
    h1.id = "title"
    head.append(h1)
    const sub = el("div", "sub")
    sub.id = "sub"
    head.append(sub)
    body.append(head)

    const stats = el("section", "stats")
    stats.id = "stats"
    body.append(stats)

    const bar = el("div", "bar")
    const search = el("input", "search")
    search.id = "search"
    search.type = "search"
    search.placeholder = "search files, tools, text…"
    search.autocomplete = "off"
    search.spellcheck = false
    bar.append(search)
    for (const [id, text, tip] of [
      ["zoom-out", "−", "zoom out"],
      ["zoom-in", "+", "zoom in"],
      ["fit", "fit", "the whole session"]
    ]) {
      const b = el("button", "btn", text)
      b.id = id
      b.title = tip
      bar.append(b)
    }
    const count = el("span", "count")
    count.id = "count"
    bar.append(count)
    const legend = el("span", "legend")
    for (const k of [
      "model",
      "tool",
      "approval",
      "report",
      "delivery",
      "review",
      "merge",
      "compaction",
      "interrupt",
      "resume",
      "failure"
    ]) {
      const item = el("span", `key k-${k}`, k)
      legend.append(item)
    }
    bar.append(legend)
    body.append(bar)

    const main = el("div", "main")
    const left = el("div", "left")
    const tl = el("div", "timeline")
    tl.id = "timeline"
    const axis = el("div", "axis")
    axis.id = "axis"
    tl.append(axis)
    const lanes = el("div", "lanes")
    lanes.id = "lanes"
    tl.append(lanes)
    const links = svg("svg", { class: "links", id: "links" })
    tl.append(links)
    left.append(tl)
    const charts = el("section", "charts")
    charts.id = "charts"
    left.append(charts)
    main.append(left)
    const detail = el("aside", "detail")
    detail.id = "detail"
    detail.append(
      el(
        "p",
        "hint",
        "Click a mark for its details: the prompt, a tool's input and output, a file's diff, a reviewer's critique."
      )
    )
    main.append(detail)
    body.append(main)

    const tables = el("section", "tables")
    tables.id = "tables"
    body.append(tables)
    const results = el("section", "results")
    results.id = "results"
    body.append(results)
    const foot = el("footer", "foot", `muse view · ${S.generatedBy ?? ""}`)
    body.append(foot)
  }

  const buildLanes = () => {
    const lanes = $("lanes")
    lanes.textContent = ""
    S.lanes.forEach((l, i) => {
      const row = el("div", `lane role-${l[1].replace(/[^a-z0-9-]/gi, "")}`)
      row.dataset.lane = String(i)
      const name = el("div", "name")
      name.append(el("span", "agent", l[0]))
      if (l[1] !== l[0]) name.append(el("span", "role", l[1]))
      row.append(name)
      const track = el("div", "track")
      track.dataset.lane = String(i)
      row.append(track)
      lanes.append(row)
    })
  }

  const trackWidth = () => {
    const t = document.querySelector(".track")
    return t ? t.clientWidth : 800
  }

  // ------------------------------------------------------------------------------------------
  // drawing

  const drawAxis = (W) => {
    const axis = $("axis")
    axis.textContent = ""
    const span = v1 - v0
    const steps = [1e3, 2e3, 5e3, 1e4, 3e4, 6e4, 12e4, 3e5, 6e5, 18e5, 36e5, 72e5, 108e5, 216e5, 432e5, 864e5]
    const want = span / Math.max(2, W / 110)
    const step = steps.find((s) => s >= want) ?? steps[steps.length - 1]
    for (let t = Math.ceil(v0 / step) * step; t <= v1; t += step) {
      const tick = el("span", "tick", clock(t))
      tick.style.left = `${((t - v0) / span) * W}px`
      axis.append(tick)
    }
  }

  const lowerBound = (arr, t) => {
    let lo = 0
    let hi = arr.length
    while (lo < hi) {
      const mid = (lo + hi) >> 1
      if (endOf(arr[mid]) < t && arr[mid][3] < t) lo = mid + 1
      else hi = mid
    }
    return lo
  }

  const drawn = new Map()
  const drawTracks = (W) => {
    drawn.clear()
    const span = v1 - v0
    const x = (t) => ((t - v0) / span) * W
    const tracks = document.querySelectorAll(".track")
    let count = 0
    tracks.forEach((track) => {
      const lane = Number(track.dataset.lane)
      const frag = document.createDocumentFragment()
      const rows = byLane[lane] ?? [[], [], []]
      rows.forEach((arr, row) => {
        // bands and bars may start before the window and reach into it: scan from a little before
        let i = row === 2 ? lowerBound(arr, v0) : 0
        let cluster = null
        const flush = () => {
          if (!cluster) return
          const c = cluster
          cluster = null
          if (c.n === 1) {
            const m = c.first
            const k = kindOf(m)
            const d = el("div", `m r${row} k-${k} s-${statusOf(m)}`)
            d.dataset.id = String(m[0])
            d.style.left = `${c.x0}px`
            if (row < 2) d.style.width = `${Math.max(2, c.x1 - c.x0)}px`
            d.title = `${k}: ${m[6]}`
            if (m[0] === selected) d.classList.add("sel")
            if (hits?.has(m[0])) d.classList.add("hit")
            frag.append(d)
            drawn.set(m[0], { lane, row, x: c.x0 })
          } else {
            const d = el("div", `m r${row} cluster k-${kindOf(c.first)}`)
            d.dataset.from = String(c.t0)
            d.dataset.to = String(c.t1)
            d.style.left = `${c.x0}px`
            d.style.width = `${Math.max(3, c.x1 - c.x0)}px`
            d.title = `${c.n} marks (click to zoom in)`
            if (c.hit) d.classList.add("hit")
            frag.append(d)
          }
          count++
        }
        for (; i < arr.length; i++) {
          const m = arr[i]
          const s = m[3]
          if (s > v1) break
          const e = row === 2 ? s : endOf(m)
          if (e < v0) continue
          const x0 = Math.max(-2, x(s))
          const x1 = Math.min(W + 2, x(e))
          const hit = hits?.has(m[0]) ?? false
          // only marks too small to tell apart are drawn as one (a bar wide enough is always its own)
          const small = x1 - x0 < 3
          if (cluster?.small && small && x0 < cluster.x1 + (row === 2 ? 1 : 1.5)) {
            cluster.n++
            cluster.x1 = Math.max(cluster.x1, x1, x0 + (row === 2 ? 0 : 2))
            cluster.t1 = Math.max(cluster.t1, e)
            cluster.hit = cluster.hit || hit
            continue
          }
          flush()
          cluster = { n: 1, first: m, x0, x1, t0: s, t1: e, hit, small }
        }
        flush()
      })
      track.textContent = ""
      track.append(frag)
    })
    $("count").textContent = `${fmtInt(count)} shown of ${fmtInt(marks.length)} marks`
  }

  // the geometry of timeline.css (.axis, .lane, .name, .m.r2), so drawing forces no layout
  const AXIS_H = 22
  const LANE_H = 46
  const NAME_W = 130
  const POINT_Y = 35
  const drawLinks = (W) => {
    const links = $("links")
    links.textContent = ""
    links.setAttribute("width", String(NAME_W + W + 8))
    links.setAttribute("height", String(AXIS_H + S.lanes.length * LANE_H + 8))
    const trackLeft = NAME_W
    const laneY = (lane) => AXIS_H + lane * LANE_H + POINT_Y
    let n = 0
    for (const [id, at] of drawn) {
      if (at.row !== 2) continue
      const m = marks[indexOf.get(id)]
      if (!m || m[8] < 0 || kindOf(m) !== "report") continue
      const to = marks[indexOf.get(m[8])]
      if (!to) continue
      const x1 = trackLeft + at.x
      const x2 = trackLeft + ((to[3] - v0) / (v1 - v0)) * W
      const line = svg("path", {
        d: `M${x1},${laneY(m[1])} C${x1},${laneY(to[1]) - 10} ${x2},${laneY(m[1]) + 10} ${x2},${laneY(to[1])}`,
        class: "link"
      })
      links.append(line)
      if (++n > 400) break
    }
  }

  // charts: cumulative tokens, cumulative cost, context size per call
  const drawCharts = (W) => {
    const box = $("charts")
    box.textContent = ""
    const span = v1 - v0
    const H = 70
    const chart = (title, series, fmt) => {
      const wrap = el("div", "chart")
      const head = el("div", "chart-title", title)
      wrap.append(head)
      const s = svg("svg", { width: W, height: H, class: "plot" })
      let max = 0
      for (const ser of series) for (const p of ser.points) max = Math.max(max, p[1])
      if (max === 0) max = 1
      for (const ser of series) {
        // one point per pixel column (its largest value) keeps long sessions cheap to draw
        const cols = new Map()
        for (const p of ser.points) {
          if (p[0] < v0 || p[0] > v1) continue
          const cx = Math.round(((p[0] - v0) / span) * W)
          cols.set(cx, Math.max(cols.get(cx) ?? 0, p[1]))
        }
        const pts = [...cols.entries()].sort((a, b) => a[0] - b[0])
        if (pts.length === 0) continue
        const d = pts
          .map(([cx, v], i) => `${i === 0 ? "M" : "L"}${cx},${(H - 4 - (v / max) * (H - 10)).toFixed(1)}`)
          .join(" ")
        s.append(svg("path", { d, class: `series ${ser.cls}` }))
      }
      wrap.append(s)
      head.append(el("span", "chart-max", ` max ${fmt(max)}`))
      box.append(wrap)
    }
    let tok = 0
    let cost = 0
    let known = false
    const tokens = []
    const costs = []
    const context = S.lanes.map(() => [])
    for (const u of S.usage) {
      tok += u[2] + u[3]
      tokens.push([u[0], tok])
      if (u[5] >= 0) {
        cost += u[5]
        known = true
      }
      costs.push([u[0], cost])
      context[u[1]]?.push([u[0], u[2]])
    }
    chart("tokens so far", [{ points: tokens, cls: "c0" }], fmtInt)
    if (known) chart("cost so far", [{ points: costs, cls: "c1" }], fmtCost)
    chart(
      "context size (input tokens of each model call, by agent)",
      context.map((points, i) => ({ points, cls: `c${(i % 6) + 2}` })),
      fmtInt
    )
  }

  const drawAll = () => {
    const W = trackWidth()
    drawAxis(W)
    drawTracks(W)
    drawLinks(W)
    drawCharts(W)
  }

  let pending = false
  const redraw = () => {
    if (pending) return
    pending = true
    requestAnimationFrame(() => {
      pending = false
      drawAll()
    })
  }

  const focusOn = (id) => {
    const m = marks[indexOf.get(id)]
    if (!m) return
    const span = v1 - v0
    const mid = (m[3] + endOf(m)) / 2
    if (m[3] < v0 || m[3] > v1) {
      v0 = Math.max(0, mid - span / 2)
      v1 = v0 + span
    }
    panels.showDetail(id)
    redraw()
  }

  // ------------------------------------------------------------------------------------------
  // interaction

  const zoom = (factor, at) => {
    const span = v1 - v0
    const full = Math.max(1000, S.meta.last)
    const next = Math.min(full * 1.05, Math.max(200, span * factor))
    const c = at ?? v0 + span / 2
    const r = (c - v0) / span
    v0 = c - r * next
    v1 = v0 + next
    clampView()
    redraw()
  }
  const clampView = () => {
    const full = Math.max(1000, S.meta.last)
    const span = v1 - v0
    if (v0 < -full * 0.02) {
      v0 = -full * 0.02
      v1 = v0 + span
    }
    if (v1 > full * 1.03) {
      v1 = full * 1.03
      v0 = v1 - span
    }
  }
  const fitView = () => {
    const full = Math.max(1000, S.meta.last)
    v0 = -full * 0.01
    v1 = full * 1.02
  }
  const fit = () => {
    fitView()
    redraw()
  }

  const wire = () => {
    const tl = $("timeline")
    tl.addEventListener(
      "wheel",
      (ev) => {
        ev.preventDefault()
        const first = document.querySelector(".track")
        if (!first) return
        const box = first.getBoundingClientRect()
        const at = v0 + ((ev.clientX - box.left) / box.width) * (v1 - v0)
        if (ev.shiftKey || Math.abs(ev.deltaX) > Math.abs(ev.deltaY)) {
          const d = (ev.shiftKey ? ev.deltaY : ev.deltaX) / box.width
          v0 += d * (v1 - v0)
          v1 += d * (v1 - v0)
          clampView()
          redraw()
        } else zoom(ev.deltaY > 0 ? 1.25 : 0.8, at)
      },
      { passive: false }
    )
    let drag = null
    tl.addEventListener("mousedown", (ev) => {
      if (ev.button !== 0) return
      drag = { x: ev.clientX, v0, v1, moved: false }
    })
    window.addEventListener("mousemove", (ev) => {
      if (!drag) return
      const dx = ev.clientX - drag.x
      if (Math.abs(dx) > 3) drag.moved = true
      if (!drag.moved) return
      const d = (dx / trackWidth()) * (drag.v1 - drag.v0)
      v0 = drag.v0 - d
      v1 = drag.v1 - d
      clampView()
      redraw()
    })
    window.addEventListener("mouseup", () => {
      setTimeout(() => {
        drag = null
      }, 0)
    })
    tl.addEventListener("click", (ev) => {
      if (drag?.moved) return
      const t = ev.target
      if (!(t instanceof HTMLElement) || !t.classList.contains("m")) return
      if (t.classList.contains("cluster")) {
        const from = Number(t.dataset.from)
        const to = Number(t.dataset.to)
        const pad = Math.max(100, (to - from) * 0.2)
        v0 = from - pad
        v1 = to + pad
        redraw()
        return
      }
      panels.showDetail(Number(t.dataset.id))
    })
    document.addEventListener("click", (ev) => {
      const t = ev.target
      if (!(t instanceof HTMLElement)) return
      if (t.id === "close") {
        selected = -1
        $("detail").textContent = ""
        redraw()
        return
      }
      const row = t.closest(".click")
      if (row instanceof HTMLElement && row.dataset.id) focusOn(Number(row.dataset.id))
    })
    $("zoom-in").addEventListener("click", () => zoom(0.5))
    $("zoom-out").addEventListener("click", () => zoom(2))
    $("fit").addEventListener("click", fit)
    let timer = 0
    $("search").addEventListener("input", (ev) => {
      clearTimeout(timer)
      timer = setTimeout(() => {
        query = ev.target.value.trim().toLowerCase()
        panels.runSearch()
      }, 120)
    })
    window.addEventListener("resize", redraw)
    document.addEventListener("keydown", (ev) => {
      if (ev.target instanceof HTMLInputElement) return
      if (ev.key === "+" || ev.key === "=") zoom(0.5)
      else if (ev.key === "-") zoom(2)
      else if (ev.key === "0") fit()
      else if (ev.key === "/") {
        ev.preventDefault()
        $("search").focus()
      }
    })
  }

  // ------------------------------------------------------------------------------------------
  // live updates (muse view --serve)

  const goLive = () => {
    const source = new EventSource(S.live)
    const status = document.querySelector(".pill.live")
    source.addEventListener("update", (ev) => {
      const u = JSON.parse(ev.data)
      const atEnd = v1 >= S.meta.last * 0.98
      for (const l of u.lanes) S.lanes.push(l)
      let added = false
      for (const m of u.marks) {
        const at = indexOf.get(m[0])
        if (at === undefined) {
          indexOf.set(m[0], marks.length)
          marks.push(m)
          added = true
        } else marks[at] = m
      }
      for (const [id, d] of u.details) panels.addLiveDetail(id, d)
      for (const p of u.usage) S.usage.push(p)
      S.meta = u.meta
      if (u.lanes.length > 0) buildLanes()
      index()
      if (atEnd) {
        const span = v1 - v0
        v1 = S.meta.last * 1.02
        v0 = Math.max(v1 - span, -S.meta.last * 0.01)
      }
      panels.fillStats()
      if (query && added) panels.runSearch()
      else redraw()
      if (selected >= 0 && u.marks.some((m) => m[0] === selected)) panels.showDetail(selected)
    })
    // the server no longer holds every update since this page was made: a fresh page has them all
    source.addEventListener("reload", () => location.reload())
    source.addEventListener("open", () => status?.classList.remove("lost"))
    source.addEventListener("error", () => status?.classList.add("lost"))
  }

  // ------------------------------------------------------------------------------------------
  // start

  const start = async () => {
    // (the marks say where the time goes: performance.getEntriesByType("mark") in the browser's console)
    performance.mark("muse-view-start")
    S = await inflate(JSON.parse($("summary").textContent))
    panels.setStore(JSON.parse($("store").textContent))
    marks = S.marks
    performance.mark("muse-view-inflated")
    index()
    build()
    buildLanes()
    fitView()
    panels.fillStats()
    performance.mark("muse-view-stats")
    wire()
    drawAll()
    body.dataset.ready = "true"
    performance.mark("muse-view-usable")
    if (S.live) goLive()
  }
  start().catch((e) => {
    const p = el("pre", "fatal", `This page could not be drawn: ${e?.message ? e.message : String(e)}`)
    document.body.append(p)
    document.body.dataset.ready = "failed"
  })
})()
