/**
 * Finding and running ripgrep. The binary comes from `@vscode/ripgrep` (ripgrep inside the
 * registry package for this platform, nothing downloaded at install time), or from `PATH`.
 *
 * @example
 * ```ts
 * const rg = await findRipgrep()            // "/…/@vscode/ripgrep-linux-x64/bin/rg" or undefined
 * const out = await runRipgrep(rg!, ["--files"], { cwd: root })
 * out.code // 0
 * ```
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"

/** Find an executable on PATH. */
export const findOnPath = (name: string, env: NodeJS.ProcessEnv = process.env): string | undefined => {
  for (const dir of (env.PATH ?? "").split(path.delimiter)) {
    if (dir === "") continue
    const candidate = path.join(dir, name)
    try {
      fs.accessSync(candidate, fs.constants.X_OK)
      if (fs.statSync(candidate).isFile()) return candidate
    } catch {}
  }
  return undefined
}

let bundled: Promise<string | undefined> | undefined

/** The ripgrep shipped for this platform by `@vscode/ripgrep`, if it is installed. */
export const bundledRipgrep = (): Promise<string | undefined> =>
  (bundled ??= import("@vscode/ripgrep").then(
    (m) => {
      try {
        fs.accessSync(m.rgPath, fs.constants.X_OK)
        return m.rgPath
      } catch {
        return undefined
      }
    },
    () => undefined
  ))

/** The ripgrep to use: the one given, else the bundled one, else `rg` on PATH. */
export const findRipgrep = async (explicit?: string): Promise<string | undefined> =>
  explicit ?? (await bundledRipgrep()) ?? findOnPath("rg")

export interface RgOutput {
  readonly code: number | null
  readonly stdout: Buffer
  readonly stderr: string
}

/** A ripgrep that could not run at all. */
export class RipgrepMissing extends Error {}

export interface RgProcess {
  /** Settles when ripgrep has exited (or was killed). */
  readonly done: Promise<{ readonly code: number | null; readonly stderr: string }>
  /** Stop it now (its output so far has been delivered). */
  readonly kill: () => void
}

/** Start ripgrep, handing its output to `onData` as it comes (killed when `signal` aborts). */
export const spawnRipgrep = (
  rg: string,
  args: ReadonlyArray<string>,
  options: {
    readonly cwd: string
    readonly signal?: AbortSignal | undefined
    readonly onData: (chunk: Buffer) => void
  }
): RgProcess => {
  const child = spawn(rg, args, {
    cwd: options.cwd,
    stdio: ["ignore", "pipe", "pipe"],
    killSignal: "SIGKILL",
    ...(options.signal ? { signal: options.signal } : {})
  })
  let stderr = ""
  let killed = false
  child.stdout.on("data", (c: Buffer) => {
    if (!killed) options.onData(c)
  })
  child.stderr.setEncoding("utf8")
  child.stderr.on("data", (c: string) => {
    if (stderr.length < 8192) stderr += c
  })
  const done = new Promise<{ code: number | null; stderr: string }>((resolve, reject) => {
    child.on("error", (e) =>
      reject(e.name === "AbortError" ? e : new RipgrepMissing(`could not run ripgrep (${rg}): ${e.message}`))
    )
    child.on("close", (code) => resolve({ code, stderr }))
  })
  return {
    done,
    kill: () => {
      killed = true
      child.kill("SIGKILL")
    }
  }
}

/** Run ripgrep to completion (killed when `signal` aborts). */
export const runRipgrep = async (
  rg: string,
  args: ReadonlyArray<string>,
  options: { readonly cwd: string; readonly signal?: AbortSignal | undefined }
): Promise<RgOutput> => {
  const chunks: Array<Buffer> = []
  const { code, stderr } = await spawnRipgrep(rg, args, { ...options, onData: (c) => chunks.push(c) }).done
  return { code, stdout: Buffer.concat(chunks), stderr }
}
