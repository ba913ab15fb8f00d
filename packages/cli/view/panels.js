// The panels of the timeline page of `muse view`: the figures at the top, the tables (time by
// agent, slowest calls), a mark's details (inflated from the page's compressed store when clicked)
// and the search. `view` is the timeline's state (view/timeline.js), read through getters.
;(() => {
  const { $, el, inflate, fmtInt, fmtDur, fmtCost } = globalThis.MuseView

  globalThis.MuseView.panels = (v) => {
    const chunkCache = new Map()
    const liveDetails = new Map()
    let detailText = null
    let store = []

    // stats and tables

    const fillStats = () => {
      const meta = v.S.meta
      const sub = $("sub")
      sub.textContent = ""
      const parts = [
        `session ${meta.session}`,
        meta.model ? `model ${meta.model}` : "",
        meta.root,
        `started ${new Date(meta.t0).toLocaleString()}`,
        v.S.live ? "live" : "",
        meta.fork ? `fork of ${meta.fork.session} at seq ${meta.fork.seq}` : ""
      ].filter((p) => p)
      for (const p of parts) sub.append(el("span", p === "live" ? "pill live" : "pill", p))
      let model = 0
      let modelMs = 0
      let tool = 0
      let toolMs = 0
      let tin = 0
      let tout = 0
      let cached = 0
      let cost = 0
      let priced = false
      const per = v.S.lanes.map(() => ({ model: 0, modelMs: 0, tool: 0, toolMs: 0, tokens: 0, cost: 0 }))
      for (const m of v.marks) {
        const k = v.kindOf(m)
        const dur = Math.max(0, v.endOf(m) - m[3])
        if (k === "model") {
          model++
          modelMs += dur
          per[m[1]].model++
          per[m[1]].modelMs += dur
        } else if (k === "tool" || k === "merge" || k === "report" || k === "verdict") {
          tool++
          toolMs += dur
          per[m[1]].tool++
          per[m[1]].toolMs += dur
        }
      }
      for (const u of v.S.usage) {
        tin += u[2]
        tout += u[3]
        cached += u[4]
        per[u[1]].tokens += u[2] + u[3]
        if (u[5] >= 0) {
          cost += u[5]
          per[u[1]].cost += u[5]
          priced = true
        }
      }
      const stats = $("stats")
      stats.textContent = ""
      const card = (label, value, note) => {
        const c = el("div", "card")
        c.append(el("div", "value", value), el("div", "label", label))
        if (note) c.append(el("div", "note", note))
        stats.append(c)
      }
      card("elapsed", fmtDur(meta.last), `${fmtInt(meta.events)} events`)
      card("agents", String(v.S.lanes.length), v.S.lanes.map((l) => l[0]).join(", "))
      card("model calls", fmtInt(model), `${fmtDur(modelMs)} waiting on models`)
      card("tool calls", fmtInt(tool), `${fmtDur(toolMs)} running tools`)
      card("tokens", fmtInt(tin + tout), `${fmtInt(tin)} in (${fmtInt(cached)} cached) · ${fmtInt(tout)} out`)
      card("cost", priced ? fmtCost(cost) : "—", priced ? "" : "the model's price is not known")

      const tables = $("tables")
      tables.textContent = ""
      const table = (title, head, rows, onClick) => {
        const wrap = el("div", "table")
        wrap.append(el("h2", "", title))
        const t = el("table")
        const tr = el("tr")
        for (const h of head) tr.append(el("th", "", h))
        t.append(tr)
        for (const r of rows) {
          const row = el("tr")
          for (const c of r.cells) row.append(el("td", "", c))
          if (onClick && r.id !== undefined) {
            row.className = "click"
            row.dataset.id = String(r.id)
          }
          t.append(row)
        }
        wrap.append(t)
        tables.append(wrap)
        return t
      }
      table(
        "time by agent: model vs tools",
        ["agent", "model calls", "model time", "tool calls", "tool time", "tokens", "cost"],
        v.S.lanes.map((l, i) => ({
          cells: [
            l[0],
            fmtInt(per[i].model),
            fmtDur(per[i].modelMs),
            fmtInt(per[i].tool),
            fmtDur(per[i].toolMs),
            fmtInt(per[i].tokens),
            priced ? fmtCost(per[i].cost) : "—"
          ]
        }))
      )
      const slow = v.marks
        .filter((m) => {
          const k = v.kindOf(m)
          return k === "model" || k === "tool" || k === "merge"
        })
        .map((m) => [v.endOf(m) - m[3], m])
        .sort((a, b) => b[0] - a[0])
        .slice(0, 12)
      table(
        "slowest calls",
        ["took", "agent", "kind", "what"],
        slow.map(([d, m]) => ({ id: m[0], cells: [fmtDur(d), v.S.lanes[m[1]]?.[0] ?? "?", v.kindOf(m), m[6]] })),
        true
      )
    }

    // details

    const chunkOf = async (idx) => {
      const c = Math.floor(idx / v.S.chunk)
      let got = chunkCache.get(c)
      if (!got) {
        got = inflate(store[c])
        chunkCache.set(c, got)
      }
      return (await got)[idx - c * v.S.chunk]
    }
    const detailOf = async (id) => {
      if (liveDetails.has(id)) return liveDetails.get(id)
      const idx = v.indexOf.get(id)
      if (idx === undefined || idx >= store.length * v.S.chunk) return null
      return chunkOf(idx)
    }

    const showDetail = async (id) => {
      v.selected = id
      for (const d of document.querySelectorAll(".m.sel")) d.classList.remove("sel")
      const node = document.querySelector(`.m[data-id="${id}"]`)
      if (node) node.classList.add("sel")
      const box = $("detail")
      box.textContent = ""
      const m = v.marks[v.indexOf.get(id)]
      if (!m) return
      box.append(el("p", "hint", "loading…"))
      const d = await detailOf(id)
      if (v.selected !== id) return
      box.textContent = ""
      box.dataset.id = String(id)
      box.dataset.kind = v.kindOf(m)
      const close = el("button", "btn close", "×")
      close.id = "close"
      close.title = "close"
      box.append(close)
      box.append(el("h2", `k-${v.kindOf(m)}`, d ? d[0] : `${v.kindOf(m)}: ${m[6]}`))
      if (!d) {
        box.append(el("p", "hint", "No details for this mark."))
        return
      }
      const rows = el("table", "rows")
      const lane = v.S.lanes[m[1]] ?? ["?", "?"]
      const when = new Date(v.S.meta.t0 + m[3])
      const own = [
        ["agent", lane[1] !== lane[0] ? `${lane[0]} (${lane[1]})` : lane[0]],
        ["at", `${when.toLocaleDateString()} ${v.clock(m[3])}.${String(when.getMilliseconds()).padStart(3, "0")}`]
      ]
      if (m[4] < 0) own.push(["state", "in flight (no outcome in the log yet)"])
      else if (m[4] > m[3]) own.push(["took", fmtDur(m[4] - m[3])])
      if (v.statusOf(m) !== "ok" && v.statusOf(m) !== "open") own.push(["status", v.statusOf(m)])
      if (m[7]) own.push(["files", m[7].split("\n").join(", ")])
      for (const [key, value] of [...own, ...d[1]]) {
        const tr = el("tr")
        tr.append(el("th", "", key), el("td", "", value))
        rows.append(tr)
      }
      box.append(rows)
      for (const [title, kind, text] of d[2]) {
        const sec = el("section", `sec sec-${kind}`)
        sec.append(el("h3", "", title))
        const pre = el("pre", kind === "diff" ? "diff" : "")
        if (kind === "diff") {
          for (const l of text.split("\n")) {
            const cls =
              l.startsWith("+++") || l.startsWith("---")
                ? "dh"
                : l.startsWith("@@")
                  ? "dc"
                  : l.startsWith("+")
                    ? "da"
                    : l.startsWith("-")
                      ? "dr"
                      : ""
            pre.append(el("span", cls, `${l}\n`))
          }
        } else pre.textContent = text
        sec.append(pre)
        box.append(sec)
      }
    }

    // search

    let loading = null
    const loadAllDetails = () => {
      loading ??= inflateAll()
      return loading
    }
    const inflateAll = async () => {
      const texts = new Map()
      for (let c = 0; c < store.length; c++) {
        const got = chunkCache.get(c) ?? inflate(store[c])
        chunkCache.set(c, got)
        const list = await got
        list.forEach((d, j) => {
          const m = v.marks[c * v.S.chunk + j]
          if (m) texts.set(m[0], `${d[1].map((r) => r[1]).join(" ")} ${d[2].map((s) => s[2]).join(" ")}`.toLowerCase())
        })
      }
      detailText = texts
      if (v.query) runSearch()
    }

    const runSearch = () => {
      const results = $("results")
      results.textContent = ""
      if (!v.query) {
        v.hits = null
        document.body.classList.remove("searching")
        v.redraw()
        return
      }
      v.hits = new Set()
      const list = []
      for (const m of v.marks) {
        const hay = `${m[6]}\n${m[7]}\n${v.S.lanes[m[1]]?.[0] ?? ""} ${v.kindOf(m)}`.toLowerCase()
        if (hay.includes(v.query) || detailText?.get(m[0])?.includes(v.query)) {
          v.hits.add(m[0])
          if (list.length < 200) list.push(m)
        }
      }
      // the details are searched too, once inflated (on the first search: a page only looked at never pays for it)
      if (!detailText) void loadAllDetails()
      document.body.classList.add("searching")
      results.append(
        el(
          "h2",
          "",
          `${fmtInt(v.hits.size)} marks match “${v.query}”${detailText ? "" : " (searching the details too once they are loaded)"}`
        )
      )
      const ul = el("ul", "hits")
      for (const m of list) {
        const li = el("li", "click")
        li.dataset.id = String(m[0])
        li.append(
          el("span", `key k-${v.kindOf(m)}`, v.kindOf(m)),
          el("span", "who", v.S.lanes[m[1]]?.[0] ?? "?"),
          el("span", "at", v.clock(m[3])),
          el("span", "what", m[6])
        )
        ul.append(li)
      }
      results.append(ul)
      v.redraw()
    }

    return {
      setStore: (chunks) => {
        store = chunks
      },
      addLiveDetail: (id, d) => liveDetails.set(id, d),
      fillStats,
      showDetail,
      runSearch,
      searched: () => detailText !== null
    }
  }
})()
