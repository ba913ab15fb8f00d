import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll } from "vitest"

const made: Array<string> = []

/** A fresh temporary directory (real path), removed after the test file. */
export const tmpDir = (prefix = "muse-wt-"): string => {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), prefix)))
  made.push(dir)
  return dir
}

// Tests never depend on the machine's git configuration.
const home = tmpDir("muse-wt-home-")
const emptyConfig = path.join(home, "gitconfig")
fs.writeFileSync(emptyConfig, "")
process.env.GIT_CONFIG_GLOBAL = emptyConfig
process.env.GIT_CONFIG_NOSYSTEM = "1"

afterAll(() => {
  for (const dir of made) fs.rmSync(dir, { recursive: true, force: true })
})

/** Run git synchronously; returns stdout without the trailing newline. */
export const sh = (cwd: string, ...args: Array<string>): string =>
  execFileSync("git", args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).replace(/\n$/, "")

/** Exit code of a git command (0 on success). */
export const code = (cwd: string, ...args: Array<string>): number => {
  try {
    execFileSync("git", args, { cwd, stdio: "ignore" })
    return 0
  } catch (e) {
    return (e as { status?: number }).status ?? 1
  }
}

export const write = (file: string, content: string) => {
  fs.mkdirSync(path.dirname(file), { recursive: true })
  fs.writeFileSync(file, content)
}

export const read = (file: string) => fs.readFileSync(file, "utf8")

/**
 * A fresh repository `<tmp>/<name>` on branch main with one commit; user identity in the repo config.
 * `files` maps relative paths to contents.
 */
export const makeRepo = (
  files: Record<string, string> = { "README.md": "# demo\n", "a.txt": "one\ntwo\nthree\n", "src/x.ts": "x\n" },
  name = "repo"
): string => {
  const parent = tmpDir()
  const repo = path.join(parent, name)
  fs.mkdirSync(repo)
  sh(repo, "init", "-q", "-b", "main")
  sh(repo, "config", "user.name", "Test User")
  sh(repo, "config", "user.email", "test@example.invalid")
  for (const [f, c] of Object.entries(files)) write(path.join(repo, f), c)
  sh(repo, "add", "-A")
  sh(repo, "commit", "-q", "-m", "initial")
  return repo
}

export const commitAll = (repo: string, message: string) => {
  sh(repo, "add", "-A")
  sh(repo, "commit", "-q", "-m", message)
  return sh(repo, "rev-parse", "HEAD")
}

/** `git worktree list --porcelain` paths. */
export const worktreePaths = (repo: string) =>
  sh(repo, "worktree", "list", "--porcelain")
    .split("\n")
    .filter((l) => l.startsWith("worktree "))
    .map((l) => l.slice("worktree ".length))

export const branches = (repo: string) => sh(repo, "branch", "--list", "--format=%(refname)")
