/**
 * Run the built `muse` (dist/bin.js) as a real process, in a sandbox: its own state directory,
 * config home and HOME, no API keys from the environment, no colors.
 */
import { execFileSync, type SpawnSyncReturns, spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

export const packageDir = fileURLToPath(new URL("../..", import.meta.url))
export const bin = path.join(packageDir, "dist", "bin.js")

const newestMtime = (dir: string): number => {
  let newest = 0
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name)
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(p) : fs.statSync(p).mtimeMs)
  }
  return newest
}

/** The sources bundled into dist/: this package's and those of the packages it bundles. */
const sources = (): Array<string> => {
  const root = path.join(packageDir, "..", "..")
  const dirs = [path.join(packageDir, "src")]
  for (const group of ["packages", "plugins"]) {
    for (const name of fs.readdirSync(path.join(root, group))) {
      const src = path.join(root, group, name, "src")
      if (fs.existsSync(src)) dirs.push(src)
    }
  }
  return dirs
}

/** Build dist/ when it is missing or older than the sources it bundles (one build at a time across test files). */
export const ensureBuilt = (): void => {
  const fresh = () =>
    fs.existsSync(bin) && fs.statSync(bin).mtimeMs >= Math.max(...sources().map((d) => newestMtime(d)))
  if (fresh()) return
  const lock = path.join(os.tmpdir(), `muse-cli-build-${process.getuid?.() ?? 0}.lock`)
  const deadline = Date.now() + 180_000
  while (true) {
    try {
      fs.mkdirSync(lock)
      break
    } catch {
      if (Date.now() - fs.statSync(lock).mtimeMs > 180_000) fs.rmSync(lock, { recursive: true, force: true })
      if (Date.now() > deadline) throw new Error("timed out waiting for another build of @musekit/cli")
      execFileSync("sleep", ["0.5"])
    }
  }
  try {
    if (!fresh()) execFileSync("npx", ["tsup", "--no-dts"], { cwd: packageDir, stdio: "pipe" })
  } finally {
    fs.rmSync(lock, { recursive: true, force: true })
  }
}

export interface Sandbox {
  readonly root: string
  readonly state: string
  readonly home: string
  readonly scripts: string
  readonly env: NodeJS.ProcessEnv
}

const SECRET_VARS = /API_KEY|BASE_URL|TOKEN|^MUSE_/

export const sandbox = (extraEnv: NodeJS.ProcessEnv = {}): Sandbox => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "muse-cli-test-"))
  const state = path.join(root, "state")
  const home = path.join(root, "home")
  const scripts = path.join(root, "scripts")
  for (const d of [state, home, scripts]) fs.mkdirSync(d, { recursive: true })
  const env: NodeJS.ProcessEnv = {}
  for (const [k, v] of Object.entries(process.env)) if (!SECRET_VARS.test(k) && !k.startsWith("VITEST")) env[k] = v
  Object.assign(env, {
    MUSE_HOME: state,
    HOME: home,
    XDG_CONFIG_HOME: path.join(home, ".config"),
    XDG_STATE_HOME: path.join(home, ".local", "state"),
    MUSE_SCRIPT_DIR: scripts,
    NO_COLOR: "1",
    FORCE_COLOR: "",
    npm_config_update_notifier: "false",
    ...extraEnv
  })
  return { root, state, home, scripts, env }
}

/**
 * PATH with every folder that holds one of `programs` replaced by links to everything else in it:
 * the machine as one without those programs sees it.
 */
export const pathWithout = (root: string, ...programs: ReadonlyArray<string>): string =>
  (process.env.PATH ?? "")
    .split(path.delimiter)
    .map((dir, i) => {
      if (!programs.some((p) => fs.existsSync(path.join(dir, p)))) return dir
      const shadow = path.join(root, `path-${i}`)
      fs.mkdirSync(shadow, { recursive: true })
      for (const name of fs.readdirSync(dir))
        if (!programs.includes(name)) fs.symlinkSync(path.join(dir, name), path.join(shadow, name))
      return shadow
    })
    .join(path.delimiter)

/** A real git repository whose unit test fails until `sum.js` adds. */
export const buggyRepo = (parent: string): string => {
  const dir = fs.mkdtempSync(path.join(parent, "repo-"))
  const write = (f: string, text: string) => fs.writeFileSync(path.join(dir, f), text)
  write(
    "package.json",
    `${JSON.stringify({ name: "demo", private: true, type: "module", scripts: { test: "node --test" } })}\n`
  )
  write("sum.js", "export const sum = (a, b) => a - b\n")
  write(
    "sum.test.js",
    'import { test } from "node:test"\nimport assert from "node:assert"\nimport { sum } from "./sum.js"\n\ntest("adds", () => assert.strictEqual(sum(2, 3), 5))\n'
  )
  const git = (...args: Array<string>) =>
    execFileSync("git", ["-c", "user.name=Test", "-c", "user.email=test@example.invalid", ...args], { cwd: dir })
  git("init", "-q", "-b", "main")
  git("add", ".")
  git("commit", "-q", "-m", "buggy sum")
  return dir
}

export const writeScript = (sb: Sandbox, name: string, script: unknown): string => {
  const file = path.join(sb.scripts, `${name}.json`)
  fs.writeFileSync(file, JSON.stringify(script, null, 2))
  return file
}

export interface Result {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

export const muse = (
  args: ReadonlyArray<string>,
  options: {
    readonly sb: Sandbox
    readonly cwd?: string
    readonly input?: string
    readonly env?: NodeJS.ProcessEnv
    /** Default 60 s. */
    readonly timeoutMs?: number
  }
): Result => {
  const r: SpawnSyncReturns<string> = spawnSync(process.execPath, [bin, ...args], {
    cwd: options.cwd ?? options.sb.root,
    env: { ...options.sb.env, ...options.env },
    input: options.input ?? "",
    encoding: "utf8",
    timeout: options.timeoutMs ?? 60_000
  })
  return { code: r.status, stdout: r.stdout, stderr: r.stderr }
}

/** Start `muse` in the background; `lines` are stdout lines as they arrive. */
export const museAsync = (args: ReadonlyArray<string>, options: { readonly sb: Sandbox; readonly cwd?: string }) => {
  const child = spawn(process.execPath, [bin, ...args], {
    cwd: options.cwd ?? options.sb.root,
    env: options.sb.env,
    stdio: ["ignore", "pipe", "pipe"]
  })
  let stdout = ""
  let stderr = ""
  const waiters: Array<() => void> = []
  child.stdout.setEncoding("utf8").on("data", (d: string) => {
    stdout += d
    for (const w of waiters.splice(0)) w()
  })
  child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d))
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on("exit", (code, signal) => resolve({ code, signal }))
  )
  const waitForLine = async (pred: (line: any) => boolean, timeoutMs = 30_000): Promise<any> => {
    const start = Date.now()
    while (Date.now() - start < timeoutMs) {
      for (const l of stdout.split("\n")) {
        if (!l.startsWith("{")) continue
        try {
          const o = JSON.parse(l)
          if (pred(o)) return o
        } catch {}
      }
      await Promise.race([new Promise<void>((r) => waiters.push(r)), new Promise((r) => setTimeout(r, 200)), exited])
      if (child.exitCode !== null && !stdout.split("\n").some((l) => l.startsWith("{") && pred(JSON.parse(l)))) break
    }
    throw new Error(`no matching line; stdout:\n${stdout.slice(-3000)}\nstderr:\n${stderr.slice(-3000)}`)
  }
  return { child, exited, waitForLine, stdout: () => stdout, stderr: () => stderr }
}

export const readLog = (sb: Sandbox, session: string): Array<any> =>
  fs
    .readFileSync(path.join(sb.state, "sessions", `${session}.jsonl`), "utf8")
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => JSON.parse(l))

/** The script of the fix-the-failing-test scenario. */
export const fixScript = (options: { readonly slowSecondCall?: number } = {}) => ({
  replies: [
    {
      when: "fix",
      steps: [
        {
          text: "Reading sum.js.",
          tools: [{ name: "read_file", params: { path: "sum.js" } }],
          usage: { input: 1000, output: 50 }
        },
        {
          text: "It subtracts; fixing it.",
          delayMs: options.slowSecondCall ?? 0,
          tools: [{ name: "edit_file", params: { path: "sum.js", edits: [{ old_text: "a - b", new_text: "a + b" }] } }],
          usage: { input: 1200, output: 60 }
        },
        {
          text: "Running the tests.",
          tools: [{ name: "run_shell", params: { command: "npm test" } }],
          usage: { input: 1400, output: 30 }
        },
        { text: "Fixed: sum adds and npm test passes.", usage: { input: 1600, output: 20 } }
      ]
    }
  ]
})
