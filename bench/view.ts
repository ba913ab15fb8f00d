/**
 * `muse view` on day-long crew sessions of 5,000 and 60,000 events (bench/_crewSession.ts, written
 * as real session logs), on the user's path: the built `muse` writes the page, Debian's chromium
 * (headless, driven by playwright-core) opens it from disk.
 *
 * - time to a usable page: from navigation start to the moment the page has drawn its lanes and
 *   wired its controls (its `muse-view-usable` mark), and to the first frame after it; beside the
 *   same browser loading an empty page (the floor), in the same run;
 * - time to show a mark's details after a click (a compressed chunk inflated) and to redraw after
 *   a zoom;
 * - `muse view` (log → page) beside `muse log` (log → text) of the same session;
 * - the page's size beside the log's.
 *
 * Run with `pnpm bench view` (`BENCH_VIEW_RUNS` sets the page loads per size, default 5). Figures
 * also go to `bench/out/view.json`. Skipped, saying why, where chromium is missing.
 */
import { execFileSync, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { writeCrewSession } from "./_crewSession.js"
import { fmtInt, fmtMs, median, printTable, writeFigures } from "./report.js"

// what the functions evaluated in the page see (this file is compiled without the DOM's types)
declare const requestAnimationFrame: (f: () => void) => number
declare const document: any

export const description = "muse view: time to a usable page for 5k and 60k events in Chromium, and the page size"

const RUNS = Number(process.env.BENCH_VIEW_RUNS ?? 5)
const cliDir = fileURLToPath(new URL("../packages/cli/", import.meta.url))
const bin = path.join(cliDir, "dist", "bin.js")
const CHROMIUM = [
  process.env.MUSE_TEST_CHROMIUM,
  ...(process.env.PATH ?? "")
    .split(path.delimiter)
    .flatMap((d) => (d ? [path.join(d, "chromium"), path.join(d, "chromium-browser")] : []))
].find((c) => c && fs.existsSync(c))

const timed = (args: ReadonlyArray<string>, env: NodeJS.ProcessEnv): number => {
  const t0 = performance.now()
  const r = spawnSync(process.execPath, [bin, ...args], {
    env,
    stdio: ["ignore", "ignore", "pipe"],
    maxBuffer: 1 << 30
  })
  const ms = performance.now() - t0
  if (r.status !== 0) throw new Error(`muse ${args.join(" ")} exited with ${r.status}: ${r.stderr}`)
  return ms
}

export const run = async (): Promise<void> => {
  if (!CHROMIUM) {
    process.stdout.write(
      "view: skipped (no chromium on this machine: apt-get install chromium, or set MUSE_TEST_CHROMIUM)\n"
    )
    return
  }
  if (!fs.existsSync(bin)) execFileSync("npx", ["tsup", "--no-dts"], { cwd: cliDir, stdio: "inherit" })
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "muse-bench-view-"))
  const env: NodeJS.ProcessEnv = { ...process.env, MUSE_HOME: path.join(root, "state"), NO_COLOR: "1" }
  const { chromium } = await import("playwright-core")
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run"
    ]
  })
  const figures: Record<string, unknown> = {}
  const rows: Array<Array<string>> = []
  try {
    const empty = path.join(root, "empty.html")
    fs.writeFileSync(
      empty,
      '<!doctype html><html><head><meta charset="utf-8"><title>empty</title></head><body><p>empty</p><script>performance.mark("muse-view-usable");document.body.dataset.ready="true"</script></body></html>\n'
    )
    const load = async (file: string) => {
      const page = await browser.newPage({ viewport: { width: 1500, height: 1000 } })
      try {
        await page.goto(`file://${file}`)
        await page.waitForSelector("body[data-ready=true]", { timeout: 60_000 })
        const usable = await page.evaluate(
          () => (performance as any).getEntriesByName("muse-view-usable")[0].startTime as number
        )
        const painted = await page.evaluate(
          () => new Promise<number>((r) => requestAnimationFrame(() => setTimeout(() => r(performance.now()), 0)))
        )
        let detail = Number.NaN
        let zoom = Number.NaN
        if ((await page.$(".track .m:not(.cluster)")) !== null) {
          const t0 = await page.evaluate(() => performance.now())
          await page.click(".track .m:not(.cluster)")
          await page.waitForSelector("#detail .rows")
          detail = (await page.evaluate(() => performance.now())) - t0
          zoom = await page.evaluate(
            () =>
              new Promise<number>((r) => {
                const t = performance.now()
                document.getElementById("zoom-in").click()
                requestAnimationFrame(() => requestAnimationFrame(() => r(performance.now() - t)))
              })
          )
        }
        return { usable, painted, detail, zoom }
      } finally {
        await page.close()
      }
    }
    const floor = []
    for (let i = 0; i < RUNS; i++) floor.push((await load(empty)).painted)
    figures.emptyPageMs = median(floor)
    rows.push(["empty page (floor)", "-", "-", "-", fmtMs(median(floor)), fmtMs(median(floor)), "-", "-", "-", "-"])
    for (const n of [5_000, 60_000]) {
      const s = writeCrewSession(path.join(root, "state"), n)
      const file = path.join(root, `${s.session}.html`)
      const gen: Array<number> = []
      const log: Array<number> = []
      for (let i = 0; i < 3; i++) {
        gen.push(timed(["view", s.session, "-o", file], env))
        log.push(timed(["log", s.session], env))
      }
      const html = fs.statSync(file).size
      const loads = []
      for (let i = 0; i < RUNS; i++) loads.push(await load(file))
      const f = {
        events: s.events,
        logBytes: s.bytes,
        htmlBytes: html,
        viewMs: median(gen),
        logMs: median(log),
        usableMs: median(loads.map((l) => l.usable)),
        paintedMs: median(loads.map((l) => l.painted)),
        detailMs: median(loads.map((l) => l.detail)),
        zoomMs: median(loads.map((l) => l.zoom)),
        usableMaxMs: Math.max(...loads.map((l) => l.painted))
      }
      figures[`events${n}`] = f
      rows.push([
        `${fmtInt(s.events)} events`,
        `${(s.bytes / 1048576).toFixed(1)} MiB`,
        `${(html / 1048576).toFixed(2)} MiB (${((html / s.bytes) * 100).toFixed(0)}%)`,
        fmtMs(f.usableMs),
        fmtMs(f.paintedMs),
        fmtMs(f.usableMaxMs),
        fmtMs(f.detailMs),
        fmtMs(f.zoomMs),
        fmtMs(f.viewMs),
        fmtMs(f.logMs)
      ])
    }
  } finally {
    await browser.close()
    fs.rmSync(root, { recursive: true, force: true })
  }
  printTable(
    `muse view in Chromium (median of ${RUNS} page loads; muse view / muse log: median of 3 runs)`,
    ["session", "log", "page", "usable", "first frame", "slowest", "details", "zoom", "muse view", "muse log"],
    rows
  )
  writeFigures("view", figures)
}
