/**
 * Secrets never reach the disk: API-key-shaped values planted in the environment and in files the
 * agent reads and edits, a session with large outputs, a large input and edits, and not one byte
 * under the state directory holds any of them (log, blobs, checkpoint, side files, everything).
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { beforeAll, describe, expect, it } from "vitest"
import { buggyRepo, ensureBuilt, muse, readLog, sandbox, writeScript } from "../support/cli.js"

beforeAll(() => ensureBuilt(), 240_000)

/** Every file under `dir`, recursively. */
const filesUnder = (dir: string): Array<string> =>
  fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name)
    return e.isDirectory() ? filesUnder(p) : [p]
  })

// Planted values: in the environment under credential-looking names, and in the shapes of well-known keys.
const ENV_SECRETS = {
  OPENAI_API_KEY: "sk-proj-Zq8vL2mN4pR6tX1yB3cD5fG7hJ9kLmNoPqRs",
  ANTHROPIC_API_KEY: "sk-ant-api03-Hk2Jm4Np6Qr8St0Uv2Wx4Yz6Ab8Cd0Ef2Gh4",
  GITHUB_TOKEN: "ghp_R4nd0mT0k3nV4lu3F0rT3st1ngPurp0s3sXY",
  MY_SERVICE_SECRET: "svc-secret-9f8e7d6c5b4a39281706",
  AWS_SECRET_ACCESS_KEY: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYTESTKEYXYZ"
}
// In a file the agent reads and edits, not in the environment: found by their shapes.
const FILE_SECRETS = {
  aws: "AKIAIOSFODNN7TESTKEY",
  slack: "xoxb-123456789012-abcdefghijklmnopqrstuvwx",
  google: "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"
}
const ALL = [...Object.values(ENV_SECRETS), ...Object.values(FILE_SECRETS)]

const settings = [
  "// service settings",
  `export const aws = "${FILE_SECRETS.aws}"`,
  `export const slack = "${FILE_SECRETS.slack}"`,
  `export const google = "${FILE_SECRETS.google}"`,
  `export const service = "${ENV_SECRETS.MY_SERVICE_SECRET}"`,
  "export const retries = 3",
  ""
].join("\n")

describe("secrets never stored", () => {
  it("none of the planted keys is in any byte under the state directory", { timeout: 180_000 }, () => {
    const sb = sandbox({ ...ENV_SECRETS })
    const repo = buggyRepo(sb.root)
    fs.writeFileSync(path.join(repo, "settings.js"), settings)
    // enough events for a checkpoint (every 1,000 events) to be written mid-task: one step of many
    // reads of a one-byte file (small results, so the context stays far from the window)
    fs.writeFileSync(path.join(repo, "one.txt"), "1\n")
    const reads = {
      tools: Array.from({ length: 340 }, () => ({ name: "read_file", params: { path: "one.txt" } }))
    }
    const script = writeScript(sb, "secrets", {
      replies: [
        {
          when: "tidy the settings",
          steps: [
            { text: "Reading the settings.", tools: [{ name: "read_file", params: { path: "settings.js" } }] },
            {
              text: "Raising the retries.",
              tools: [
                {
                  name: "edit_file",
                  params: { path: "settings.js", edits: [{ old_text: "retries = 3", new_text: "retries = 5" }] }
                }
              ]
            },
            // a large output with the environment in it (goes to the blob store, then is clipped by
            // compaction: measured on the redacted text live as in a replay)
            { tools: [{ name: "run_shell", params: { command: "env; cat settings.js; seq 1 12000" } }] },
            // a new file holding a key (its content is in the call's parameters)
            {
              tools: [
                {
                  name: "write_file",
                  params: { path: "notes.txt", content: `token in use: ${ENV_SECRETS.GITHUB_TOKEN}\n` }
                }
              ]
            },
            reads,
            { text: `Done. The key ${ENV_SECRETS.OPENAI_API_KEY} was not touched.` }
          ]
        }
      ]
    })
    // a large task, with a key in it, on stdin
    const task = `tidy the settings\n${`context line with ${FILE_SECRETS.aws} in it\n`.repeat(2000)}`
    const r = muse(
      ["run", "-", "--script", script, "--approval-mode", "auto", "--no-crew", "--output-format", "json"],
      {
        sb,
        cwd: repo,
        input: task,
        timeoutMs: 120_000
      }
    )
    expect(r.code, r.stderr).toBe(0)
    const session = JSON.parse(r.stdout).session as string
    expect(fs.readFileSync(path.join(repo, "settings.js"), "utf8")).toBe(settings.replace("retries = 3", "retries = 5"))

    // what was stored: the log, blobs (the large input and output), sealed copies of settings.js,
    // a checkpoint
    const files = filesUnder(sb.state)
    const names = files.map((f) => path.relative(sb.state, f))
    expect(names).toContain(`sessions/${session}.jsonl`)
    expect(names).toContain(`sessions/${session}.checkpoint.json`)
    expect(names.filter((n) => n.startsWith("blobs/") && !n.endsWith(".sealed")).length).toBeGreaterThanOrEqual(2)
    const log = readLog(sb, session)
    // the copy of settings.js kept from before the edit (to restore it exactly) holds keys: it is
    // sealed, never stored plain; a copy of it after the edit, if kept, is sealed too
    const edit = log.find((e) => e.type === "file.changed" && e.data.path === "settings.js").data
    expect(names).toContain(`blobs/${edit.before.slice(0, 2)}/${edit.before}.sealed`)
    for (const hash of [edit.before, edit.after]) expect(names).not.toContain(`blobs/${hash.slice(0, 2)}/${hash}`)

    for (const file of files) {
      const bytes = fs.readFileSync(file).toString("latin1")
      for (const secret of ALL) {
        expect(bytes.includes(secret), `${secret.slice(0, 8)}… found in ${path.relative(sb.state, file)}`).toBe(false)
      }
    }
    // the redaction markers show where they were
    const text = files.map((f) => fs.readFileSync(f, "latin1")).join("\n")
    expect(text).toContain("[REDACTED:MY_SERVICE_SECRET]")
    expect(text).toContain("[REDACTED:GITHUB_TOKEN]")
    expect(text).toContain("[REDACTED]")
    // the key of the sealed copy is kept outside the state directory, readable by the user alone
    const key = path.join(sb.home, ".config", "muse", "blob.key")
    expect(fs.statSync(key).mode & 0o777).toBe(0o600)

    // and the session still replays exactly
    const v = muse(["replay", session, "--verify"], { sb, cwd: repo })
    expect(v.code, v.stderr).toBe(0)
  })
})
