// Helpers of the timeline page of `muse view` (the first of its scripts: view/format.js,
// view/panels.js, view/timeline.js, each allowed by its hash in the page's Content-Security-Policy):
// making elements (text goes in with textContent, never as markup), inflating the page's
// deflate-raw blocks with the browser's DecompressionStream, formatting numbers and durations.
;(() => {
  const $ = (id) => document.getElementById(id)
  const el = (tag, cls, text) => {
    const e = document.createElement(tag)
    if (cls) e.className = cls
    if (text !== undefined) e.textContent = text
    return e
  }
  const svgNs = "http://www.w3.org/2000/svg"
  const svg = (tag, attrs) => {
    const e = document.createElementNS(svgNs, tag)
    for (const k in attrs) e.setAttribute(k, String(attrs[k]))
    return e
  }

  const fromBase64 = (b64) => {
    if (typeof Uint8Array.fromBase64 === "function") return Uint8Array.fromBase64(b64)
    const bin = atob(b64)
    const out = new Uint8Array(bin.length)
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i)
    return out
  }
  const inflate = async (b64) => {
    const stream = new Blob([fromBase64(b64)]).stream().pipeThrough(new DecompressionStream("deflate-raw"))
    return JSON.parse(await new Response(stream).text())
  }

  // ------------------------------------------------------------------------------------------
  // formatting

  const fmtInt = (n) => Math.round(n).toLocaleString("en-US")
  const fmtDur = (ms) => {
    if (ms < 1000) return `${Math.round(ms)}ms`
    if (ms < 60000) return `${(ms / 1000).toFixed(1)}s`
    if (ms < 3600000) return `${Math.floor(ms / 60000)}m${String(Math.floor((ms % 60000) / 1000)).padStart(2, "0")}s`
    return `${Math.floor(ms / 3600000)}h${String(Math.floor((ms % 3600000) / 60000)).padStart(2, "0")}m`
  }
  const fmtCost = (usd) => (usd < 0.01 ? `$${usd.toFixed(4)}` : `$${usd.toFixed(2)}`)
  const two = (n) => String(n).padStart(2, "0")

  globalThis.MuseView = { $, el, svg, inflate, fmtInt, fmtDur, fmtCost, two }
})()
