/**
 * Records the terminal transcript shown in the README: `muse` in an 80-column pseudo-terminal on
 * a small repository whose unit test fails, driven by `examples/fix-failing-test.script.json`, with
 * approvals answered as a person would. Prints the screen (scrollback included).
 *
 * ```sh
 * pnpm --filter @musekit/cli build && pnpm --filter @musekit/cli exec tsx scripts/record-transcript.ts
 * ```
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { spawnInTerminal } from "../test/support/terminal.js"

const here = path.dirname(fileURLToPath(import.meta.url))
const bin = path.join(here, "..", "dist", "bin.js")
const script = path.join(here, "..", "examples", "fix-failing-test.script.json")

const home = fs.mkdtempSync(path.join(os.tmpdir(), "muse-transcript-"))
const repo = path.join(home, "calc")
fs.mkdirSync(repo)
const write = (f: string, text: string) => fs.writeFileSync(path.join(repo, f), text)
write(
  "package.json",
  `${JSON.stringify({ name: "calc", private: true, type: "module", scripts: { test: "node --test" } })}\n`
)
write("sum.js", "export const sum = (a, b) => a - b\n")
write(
  "sum.test.js",
  'import { test } from "node:test"\nimport assert from "node:assert"\nimport { sum } from "./sum.js"\n\ntest("adds", () => assert.strictEqual(sum(2, 3), 5))\n'
)
write("AGENTS.md", "# calc\n\nRun `npm test` after every change. Keep functions pure.\n")
execFileSync("git", ["init", "-q", "-b", "main"], { cwd: repo })

const t = spawnInTerminal(process.execPath, [bin, "--script", script, "--approval-mode", "ask"], {
  cwd: repo,
  cols: 80,
  rows: 40,
  env: {
    ...process.env,
    MUSE_HOME: path.join(home, "state"),
    HOME: home,
    TERM: "xterm-256color",
    MUSE_MODEL: "",
    npm_config_update_notifier: "false"
  }
})
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
await t.waitFor("Type a task")
await sleep(300)
t.type("The unit test fails. Fix it.\r")
await t.waitFor("[y] yes")
await sleep(300)
t.type("y")
await t.waitFor("wants to run")
await t.waitFor(/wants to run[\s\S]*\[y\] yes/)
await sleep(300)
t.type("s")
await t.waitFor(/✓ done/)
await sleep(500)
t.type("/agents\r")
await sleep(800)
t.type("/exit\r")
await t.exited
process.stdout.write(`${t.all().replace(/\n+$/, "")}\n`)
fs.rmSync(home, { recursive: true, force: true })
process.exit(0)
