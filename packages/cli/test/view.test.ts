/**
 * `muse view`: a recorded crew session (a worker in its worktree, a reviewer, a merge) rendered
 * as a page and opened in a real headless Chromium: lanes, marks and a diff panel in the DOM, a
 * screenshot kept as an artifact, and script planted in model text and in a file name that does
 * not run. `--serve` keeps a page live while the session runs. Without chromium the browser parts
 * are skipped (saying so); the page's data is still checked in Node.
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import * as path from "node:path"
import type { Browser, Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { artifactsDir, chromium, detailsOf, launch, summaryOf } from "./support/browser.js"
import { bin, buggyRepo, ensureBuilt, muse, museAsync, readLog, sandbox, writeScript } from "./support/cli.js"

// what the functions evaluated in the page see (this file is compiled without the DOM's types)
declare const window: any
declare const document: any

const PAYLOAD_FILE = "notes <img src=x onerror=window.__pwned=1>.md"
const PAYLOAD_TEXT = 'Handing it over. <script>window.__pwned=2</script><img src=x onerror="window.__pwned=3">'

const crewScript = (slow = 0) => ({
  replies: [
    {
      agent: "main",
      when: "Crew reports",
      steps: [
        { text: "Merging.", tools: [{ name: "worktree_merge", params: { agent: "worker-1", message: "notes" } }] },
        { text: "Merged the notes." }
      ]
    },
    {
      agent: "main",
      when: "write the notes",
      steps: [
        {
          text: PAYLOAD_TEXT,
          usage: { input: 2400, output: 60 },
          tools: [{ name: "delegate", params: { to: "worker", task: "write the notes file" } }]
        },
        { text: "A worker is on it." }
      ]
    },
    {
      agent: "worker",
      when: "notes file",
      steps: [
        {
          delayMs: slow,
          usage: { input: 1800, output: 90 },
          tools: [
            {
              name: "write_file",
              params: { path: PAYLOAD_FILE, content: "# Notes\n<script>window.__pwned=5</script>\n" }
            }
          ]
        },
        { delayMs: slow, tools: [{ name: "run_shell", params: { command: "cat *.md" } }] },
        {
          tools: [
            {
              name: "report",
              params: { importance: "notable", text: "notes written <img src=x onerror=window.__pwned=6>" }
            }
          ]
        },
        { text: "Wrote the notes." }
      ]
    },
    {
      agent: "reviewer",
      steps: [
        {
          delayMs: slow,
          tools: [
            {
              name: "verdict",
              params: { worker: "worker-1", verdict: "approve", critique: "Fine. <img src=x onerror=window.__pwned=4>" }
            }
          ]
        },
        { text: "Approved." }
      ]
    }
  ]
})

const browserFound = chromium()
const skipBrowser = "skip" in browserFound ? browserFound.skip : undefined

beforeAll(() => ensureBuilt(), 240_000)

let browser: Browser | undefined
const getBrowser = async () => {
  if (!browser && "path" in browserFound) browser = await launch(browserFound.path)
  return browser!
}
afterAll(async () => {
  await browser?.close()
})

/** A page opened at `url` that records every dialog and page error; ready once it says so. */
const open = async (url: string) => {
  const b = await getBrowser()
  const page = await b.newPage({ viewport: { width: 1500, height: 1000 } })
  const dialogs: Array<string> = []
  const errors: Array<string> = []
  const violations: Array<string> = []
  page.on("dialog", (d) => {
    dialogs.push(d.message())
    void d.dismiss()
  })
  page.on("pageerror", (e) => errors.push(e.message))
  page.on("console", (m) => {
    if (m.type() === "error") violations.push(m.text())
  })
  await page.goto(url)
  await page.waitForSelector("body[data-ready=true]", { timeout: 30_000 })
  return { page, dialogs, errors, violations }
}

const search = async (page: Page, text: string) => {
  await page.fill("#search", text)
  await page.waitForSelector(".hits li", { timeout: 10_000 })
}

describe("muse view", () => {
  const sb = sandbox()
  const repo = buggyRepo(sb.root)
  let session = ""
  let html = ""
  let file = ""

  beforeAll(() => {
    const script = writeScript(sb, "crew", crewScript())
    const r = muse(
      ["run", "write the notes", "--script", script, "--approval-mode", "auto", "--output-format", "json"],
      {
        sb,
        cwd: repo
      }
    )
    expect(r.code, r.stderr).toBe(0)
    session = JSON.parse(r.stdout).session
    file = path.join(sb.root, "page.html")
    const v = muse(["view", session, "-o", file], { sb, cwd: repo })
    expect(v.code, v.stderr).toBe(0)
    expect(v.stdout.trim()).toBe(file)
    html = fs.readFileSync(file, "utf8")
  }, 120_000)

  it("writes one page whose data holds a lane per agent, the crew's marks, and the report reaching main", () => {
    const events = readLog(sb, session)
    const s = summaryOf(html)
    expect(s.meta.session).toBe(session)
    expect(s.meta.events).toBe(events.length)
    const lanes = s.lanes.map((l: Array<string>) => l[0])
    expect(lanes).toEqual(["main", "worker-1", "reviewer-1"])
    const kinds = new Set(s.marks.map((m: Array<number>) => s.kinds[m[2]]))
    for (const k of [
      "turn",
      "task",
      "model",
      "tool",
      "report",
      "delivery",
      "review",
      "verdict",
      "merge",
      "input",
      "spawn"
    ]) {
      expect(kinds, k).toContain(k)
    }
    // one model mark per model call, each closed by its response
    const models = s.marks.filter((m: Array<number>) => s.kinds[m[2]] === "model")
    expect(models).toHaveLength(events.filter((e) => e.type === "model.requested").length)
    expect(models.every((m: Array<number>) => m[4] >= m[3])).toBe(true)
    // the report on worker-1 links to its delivery on main, which comes after it
    const report = s.marks.find((m: Array<any>) => s.kinds[m[2]] === "report")
    const delivery = s.marks.find((m: Array<any>) => m[0] === report[8])
    expect(s.kinds[delivery[2]]).toBe("delivery")
    expect(s.lanes[delivery[1]][0]).toBe("main")
    expect(delivery[3]).toBeGreaterThanOrEqual(report[3])
    // the merge says where the work went
    const merge = s.marks.find((m: Array<any>) => s.kinds[m[2]] === "merge")
    expect(merge[6]).toMatch(/^merged worker-1 into main \([0-9a-f]{10}\)$/)
    // the write's details hold its diff; the model call's, the prompt excerpt
    const details = detailsOf(html)
    expect(details).toHaveLength(s.marks.length)
    const write = s.marks.findIndex((m: Array<any>) => m[6].startsWith("write_file"))
    const diff = details[write][2].find((sec: Array<string>) => sec[1] === "diff")
    expect(diff[2]).toContain("+# Notes")
    const firstModel = s.marks.findIndex((m: Array<any>) => s.kinds[m[2]] === "model")
    expect(details[firstModel][2][0][0]).toMatch(/^prompt excerpt/)
    expect(details[firstModel][2][0][2]).toContain("write the notes")
    // a page, not a bundle: small, and nothing it could load from elsewhere
    expect(Buffer.byteLength(html)).toBeLessThan(200 * 1024)
    expect(html).not.toMatch(/<(link|iframe|img|object|embed)\b/i)
    expect(html).not.toMatch(/https?:\/\/(?!www\.w3\.org\/2000\/svg)/)
    expect(html).toContain('http-equiv="Content-Security-Policy"')
    // the planted payloads reach the page only as escaped JSON inside its compressed blocks
    expect(html).not.toContain("__pwned")
  })

  it.skipIf(skipBrowser !== undefined)(
    `opens in Chromium with lanes, marks and a diff panel, and runs nothing from the log${skipBrowser ? ` (skipped: ${skipBrowser})` : ""}`,
    async () => {
      const { page, dialogs, errors } = await open(`file://${file}`)
      try {
        expect(await page.$$eval(".lane .agent", (n) => n.map((x) => x.textContent))).toEqual([
          "main",
          "worker-1",
          "reviewer-1"
        ])
        expect(await page.locator(".track .m").count()).toBeGreaterThan(10)
        expect(await page.locator(".track .m.k-model, .track .m.cluster").count()).toBeGreaterThan(0)
        // the stats: every model call, counted
        const events = readLog(sb, session)
        const calls = events.filter((e) => e.type === "model.requested").length
        expect(await page.locator("#stats .card", { hasText: "model calls" }).locator(".value").textContent()).toBe(
          String(calls)
        )

        // search by file name (the payload file): its write is found; clicking it shows the diff
        await search(page, "onerror=window.__pwned=1")
        const hit = page.locator(".hits li:has(.k-tool)", { hasText: "write_file" }).first()
        await hit.click()
        await page.waitForSelector("#detail .sec-diff pre.diff")
        expect(await page.locator("#detail .sec-diff pre.diff .da").allTextContents()).toContain("+# Notes\n")
        // the file name is shown as text, exactly as recorded
        expect(await page.locator("#detail h2").textContent()).toContain(PAYLOAD_FILE)
        await page.fill("#search", "")
        await page.click("#fit")
        await page.screenshot({ path: path.join(artifactsDir(), "view-crew-session.png"), fullPage: true })

        // model text with a script and an onerror handler: shown as text, run never
        await search(page, "handing it over")
        await page.locator(".hits li:has(.k-model)", { hasText: "Handing it over" }).first().click()
        await page.waitForSelector("#detail .sec")
        expect(await page.locator("#detail").textContent()).toContain("<script>window.__pwned=2</script>")
        // the reviewer's critique, also with a handler in it
        await search(page, "verdict for worker-1")
        await page.locator(".hits li:has(.k-verdict)").first().click()
        await page.waitForSelector("#detail .sec h3:text('critique')")
        expect(await page.locator("#detail").textContent()).toContain("Fine. <img src=x onerror=window.__pwned=4>")
        await page.waitForTimeout(300)
        expect(await page.evaluate(() => window.__pwned)).toBeUndefined()
        expect(await page.$$eval("img, iframe, object, embed, script", (n) => n.length)).toBe(0)
        expect(dialogs).toEqual([])
        expect(errors).toEqual([])

        // and were the page ever to put such text in as markup, its policy would not run it
        const blocked = await page.evaluate(async () => {
          const seen: Array<string> = []
          document.addEventListener("securitypolicyviolation", (e: any) => seen.push(e.violatedDirective))
          const div = document.createElement("div")
          div.innerHTML = '<img src="data:," onerror="window.__pwned=7">'
          document.body.append(div)
          await new Promise((r) => setTimeout(r, 300))
          return { seen, pwned: window.__pwned }
        })
        expect(blocked.pwned).toBeUndefined()
        expect(blocked.seen.some((d) => d.startsWith("script-src"))).toBe(true)
      } finally {
        await page.close()
      }
    },
    120_000
  )

  it("views a fork of the session, saying whose fork it is", () => {
    const f = muse(["fork", session, "--at", "last", "--json"], { sb, cwd: repo })
    expect(f.code, f.stderr).toBe(0)
    const forked = JSON.parse(f.stdout)
    const out = path.join(sb.root, "fork.html")
    const v = muse(["view", forked.session, "-o", out], { sb, cwd: repo })
    expect(v.code, v.stderr).toBe(0)
    const s = summaryOf(fs.readFileSync(out, "utf8"))
    expect(s.meta.fork).toEqual({ session, seq: forked.target.seq })
    const mark = s.marks.find((m: Array<any>) => s.kinds[m[2]] === "fork")
    expect(mark?.[0]).toBe(forked.target.seq)
  })

  it("says clearly when there is no such session, and writes nothing", () => {
    const out = path.join(sb.root, "none.html")
    const v = muse(["view", "20990101-000000-000000", "-o", out], { sb, cwd: repo })
    expect(v.code).not.toBe(0)
    expect(v.stderr).toContain("20990101-000000-000000")
    expect(fs.existsSync(out)).toBe(false)
  })
})

describe("muse view --serve", () => {
  it.skipIf(skipBrowser !== undefined)(
    `serves the page on 127.0.0.1 and keeps it live while the session runs${skipBrowser ? ` (skipped: ${skipBrowser})` : ""}`,
    async () => {
      const sb = sandbox()
      const repo = buggyRepo(sb.root)
      const script = writeScript(sb, "slow", crewScript(1500))
      const run = museAsync(
        ["run", "write the notes", "--script", script, "--approval-mode", "auto", "--output-format", "stream-json"],
        { sb, cwd: repo }
      )
      const session = (await run.waitForLine((l) => l.kind === "session")).session as string
      // the session is in the store once its first events are
      await run.waitForLine((l) => l.kind === "event" && l.event.type === "user.input")
      const server = spawn(process.execPath, [bin, "view", session, "--serve"], {
        cwd: repo,
        env: sb.env,
        stdio: ["ignore", "pipe", "pipe"]
      })
      try {
        const url = await new Promise<string>((resolve, reject) => {
          let buf = ""
          server.stdout.setEncoding("utf8").on("data", (d: string) => {
            buf += d
            const m = /^(http:\/\/127\.0\.0\.1:\d+\/[0-9a-f]{32}\/)$/m.exec(buf)
            if (m) resolve(m[1]!)
          })
          server.on("exit", (code) => reject(new Error(`muse view --serve exited with ${code}`)))
        })
        // only this host name, only the random path
        const u = new URL(url)
        const get = (pathname: string, host: string) =>
          new Promise<number>((resolve, reject) =>
            http
              .get({ host: "127.0.0.1", port: u.port, path: pathname, headers: { host } }, (res) => {
                res.resume()
                resolve(res.statusCode ?? 0)
              })
              .on("error", reject)
          )
        expect(await get(u.pathname, `evil.example:${u.port}`)).toBe(421)
        expect(await get("/", `127.0.0.1:${u.port}`)).toBe(404)

        const { page, dialogs, errors } = await open(url)
        try {
          const ended = await run.exited
          expect(ended.code, run.stderr()).toBe(0)
          const calls = readLog(sb, session).filter((e) => e.type === "model.requested").length
          // the page caught up with the whole session without being reloaded
          await page.waitForFunction(
            (n) =>
              document.querySelector("#stats .card:nth-child(3) .value")?.textContent === String(n) &&
              document.querySelectorAll(".lane").length === 3,
            calls,
            { timeout: 30_000 }
          )
          expect(await page.locator(".pill.live").count()).toBe(1)
          await search(page, "merged worker-1")
          expect(await page.evaluate(() => window.__pwned)).toBeUndefined()
          expect(dialogs).toEqual([])
          expect(errors).toEqual([])
        } finally {
          await page.close()
        }
      } finally {
        server.kill("SIGINT")
        run.child.kill("SIGKILL")
      }
    },
    120_000
  )
})
