/**
 * Regenerates the example session shipped with the CLI (`muse replay --example`).
 *
 * It builds a small git repository whose unit test fails, runs `muse run` on it with the scripted
 * model of `examples/fix-failing-test.script.json` (through SessionRuntime, into a temporary state
 * directory), copies the session log and its blobs into `examples/`, and checks that the copy
 * replays exactly.
 *
 * ```sh
 * pnpm --filter @musekit/cli exec tsx scripts/make-example.ts
 * ```
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { main } from "../src/internal/main.js"

const here = path.dirname(fileURLToPath(import.meta.url))
const examples = path.join(here, "..", "examples")
const NAME = "fix-failing-test"

const makeRepo = (dir: string) => {
  fs.rmSync(dir, { recursive: true, force: true })
  fs.mkdirSync(dir, { recursive: true })
  const write = (f: string, text: string) => fs.writeFileSync(path.join(dir, f), text)
  write(
    "package.json",
    `${JSON.stringify({ name: "calc", private: true, type: "module", scripts: { test: "node --test" } }, null, 2)}\n`
  )
  write("sum.js", "export const sum = (a, b) => a - b\n")
  write(
    "sum.test.js",
    'import { test } from "node:test"\nimport assert from "node:assert"\nimport { sum } from "./sum.js"\n\ntest("adds", () => assert.strictEqual(sum(2, 3), 5))\n'
  )
  write("AGENTS.md", "# calc\n\nRun `npm test` after every change. Keep functions pure.\n")
  const git = (...args: Array<string>) =>
    execFileSync("git", ["-c", "user.name=Example", "-c", "user.email=example@example.invalid", ...args], { cwd: dir })
  git("init", "-q", "-b", "main")
  git("add", ".")
  git("commit", "-q", "-m", "calc with a bug")
}

const run = async (argv: Array<string>, env: NodeJS.ProcessEnv, cwd: string) => {
  const code = await main({ argv, env, cwd, stdin: process.stdin, stdout: process.stdout, stderr: process.stderr })
  if (code !== 0) throw new Error(`muse ${argv.join(" ")} exited with ${code}`)
}

const repo = path.join(os.tmpdir(), "muse-example", "calc")
const state = fs.mkdtempSync(path.join(os.tmpdir(), "muse-example-state-"))
makeRepo(repo)
const env = { ...process.env, MUSE_HOME: state, MUSE_MODEL: "", NO_COLOR: "1", npm_config_update_notifier: "false" }
await run(
  [
    "run",
    "The unit test fails. Fix it.",
    "--script",
    path.join(examples, `${NAME}.script.json`),
    "--allow",
    "run_shell:npm test",
    "--cwd",
    repo
  ],
  env,
  repo
)
const [file] = fs.readdirSync(path.join(state, "sessions")).filter((f) => f.endsWith(".jsonl"))
if (!file) throw new Error("no session was recorded")
fs.rmSync(path.join(examples, "blobs"), { recursive: true, force: true })
fs.copyFileSync(path.join(state, "sessions", file), path.join(examples, `${NAME}.jsonl`))
if (fs.existsSync(path.join(state, "blobs")))
  fs.cpSync(path.join(state, "blobs"), path.join(examples, "blobs"), { recursive: true })
await run(["replay", "--example", "--verify"], env, repo)
fs.rmSync(state, { recursive: true, force: true })
process.stdout.write(`\nwrote examples/${NAME}.jsonl\n`)
process.exit(0)
