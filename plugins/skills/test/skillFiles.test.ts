import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Agent, Model, Session, Skill } from "@musekit/core"
import { layerAgentServices, Scripted, scriptedModel } from "@musekit/core/testing"
import { Effect, Either } from "effect"
import { SkillFiles, SkillsPlugin } from "../src/index.js"
import { recordLive } from "./helpers.js"

const tempDirs = (files: Record<string, string>) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "muse-skillfiles-"))
      for (const [name, content] of Object.entries(files)) {
        fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true })
        fs.writeFileSync(path.join(dir, name), content)
      }
      return { project: path.join(dir, "project"), home: path.join(dir, "home") }
    }),
    ({ project }) => Effect.sync(() => fs.rmSync(path.dirname(project), { recursive: true, force: true }))
  )

const skillMd = (front: string, body: string) => `---\n${front}\n---\n${body}\n`

const files = {
  // Claude Code format, unchanged, with extra front matter fields and a $ARGUMENTS placeholder
  "project/.claude/skills/release-notes/SKILL.md": skillMd(
    "name: release-notes\ndescription: Write release notes for the changes since the last tag.\nallowed-tools: Read, Grep\nargument-hint: '[focus]'",
    "# Release notes\n\nRead the git log since the last tag and write RELEASE_NOTES.md.\nFocus on: $ARGUMENTS"
  ),
  "project/.muse/skills/greet/SKILL.md": skillMd(
    "name: greet\ndescription: |\n  Greet someone warmly.\n  Use when asked to say hello.",
    "Say hello to the person named in the arguments."
  ),
  // a user skill, and one the project overrides
  "home/.muse/skills/standup/SKILL.md": skillMd(
    "name: standup\ndescription: Summarize yesterday's commits",
    "List the commits."
  ),
  "home/.muse/skills/greet/SKILL.md": skillMd("name: greet\ndescription: The user's greeting", "Wave."),
  // malformed ones
  "project/.muse/skills/broken-yaml/SKILL.md": skillMd("name: broken-yaml\ndescription: [unclosed", "Body."),
  "project/.muse/skills/no-description/SKILL.md": skillMd("name: no-description", "Body."),
  "project/.claude/skills/bad-name/SKILL.md": skillMd("name: Bad_Name\ndescription: Shouts", "Body."),
  "project/.claude/skills/no-front-matter/SKILL.md": "# Just markdown\n",
  "project/.claude/skills/empty-body/SKILL.md": skillMd("name: empty-body\ndescription: Nothing to say", ""),
  // not skills
  "project/.claude/skills/notes.md": "not a skill folder",
  "project/.claude/skills/assets/readme.txt": "a folder without SKILL.md"
}

describe("SkillFiles", () => {
  it.scoped("discovers project and user SKILL.md files and reports each malformed one by file", () =>
    Effect.gen(function* () {
      const { project, home } = yield* tempDirs(files)
      const loaded = yield* SkillFiles.load({ projectDir: project, userDir: home })
      expect(loaded.files.map((f) => [f.name, f.displayPath, f.scope])).toEqual([
        ["greet", ".muse/skills/greet/SKILL.md", "project"],
        ["release-notes", ".claude/skills/release-notes/SKILL.md", "project"],
        ["standup", "~/.muse/skills/standup/SKILL.md", "user"]
      ])
      const notes = loaded.files.find((f) => f.name === "release-notes")!
      expect(notes.description).toBe("Write release notes for the changes since the last tag.")
      expect(notes.frontMatter["allowed-tools"]).toBe("Read, Grep")
      expect(notes.instructions.startsWith("# Release notes")).toBe(true)
      expect(loaded.files[0]!.description).toBe("Greet someone warmly.\nUse when asked to say hello.")
      expect(loaded.shadowed).toEqual([
        { name: "greet", file: "~/.muse/skills/greet/SKILL.md", by: ".muse/skills/greet/SKILL.md" }
      ])

      expect(loaded.errors.map((e) => e._tag)).toEqual(Array(5).fill("SkillFileError"))
      const messages = loaded.errors.map((e) => e.message)
      expect(messages[0]).toMatch(
        /^\.muse\/skills\/broken-yaml\/SKILL\.md: invalid YAML in the front matter \(line 3 of the file\): /
      )
      expect(messages.slice(1)).toEqual([
        ".muse/skills/no-description/SKILL.md: missing `description` in the front matter: say what the skill does and when to use it",
        `.claude/skills/bad-name/SKILL.md: invalid name "Bad_Name": use lowercase letters, digits and '-' (at most 64 characters, starting with a letter or digit)`,
        ".claude/skills/empty-body/SKILL.md: no instructions: the body after the front matter is empty",
        ".claude/skills/no-front-matter/SKILL.md: no YAML front matter: the file must start with a line '---', then `name:` and `description:`, then '---'"
      ])
    })
  )

  it.scoped("a SKILL.md skill is invocable: its instructions and arguments go to the agent in context", () =>
    Effect.gen(function* () {
      const { project, home } = yield* tempDirs(files)
      const { plugin, errors } = yield* SkillsPlugin.load({ projectDir: project, userDir: home })
      expect(errors).toHaveLength(5)
      expect(plugin.name).toBe("skills")
      expect(plugin.skills!.map((s) => s.name)).toEqual(["plan", "grill", "goal", "greet", "release-notes", "standup"])
      const model = scriptedModel([Scripted.text("Notes written.")])
      const program = Effect.gen(function* () {
        const agent = yield* Agent.make({ name: "main", instructions: "You help." })
        const registry = Skill.makeRegistry(plugin.skills)
        return yield* registry
          .invoke("/release-notes the public API")
          .pipe(Effect.provideService(Skill.SkillContext, { agent, output: () => Effect.void }))
      })
      const { result, events } = yield* recordLive(
        program.pipe(Effect.provide(layerAgentServices({ languageModel: model.layer })))
      )
      expect(result).toMatchObject({ status: "completed", text: "Notes written." })
      const sent = (events.find((e) => e.type === "user.message")!.data as { text: string }).text
      expect(sent).toBe(
        [
          '<skill name="release-notes" file=".claude/skills/release-notes/SKILL.md">',
          "Base directory of this skill: .claude/skills/release-notes",
          "",
          "# Release notes",
          "",
          "Read the git log since the last tag and write RELEASE_NOTES.md.",
          "Focus on: the public API",
          "</skill>"
        ].join("\n")
      )
      expect(JSON.stringify(model.prompts[0]!.content)).toContain("Focus on: the public API")

      const report = yield* Session.replay(
        program.pipe(Effect.provide(layerAgentServices({ languageModel: Model.layerLanguageModelForbidden }))),
        { events, verify: true }
      )
      expect(report.matched).toBe(events.length)
    })
  )

  it("appends the arguments when the body has no $ARGUMENTS, and rejects files named like a built-in", () => {
    const parsed = SkillFiles.parse(skillMd("name: greet\ndescription: Greets", "Say hello."), "/x/SKILL.md", {
      displayPath: ".muse/skills/greet/SKILL.md"
    })
    const file = Either.getOrThrow(parsed)
    expect(SkillFiles.message(file, "Ada")).toBe(
      '<skill name="greet" file=".muse/skills/greet/SKILL.md">\nBase directory of this skill: .muse/skills/greet\n\nSay hello.\n</skill>\n\nArguments: Ada'
    )
    expect(SkillFiles.toSkill(file).source).toBe(".muse/skills/greet/SKILL.md")
    const windows = SkillFiles.parse("---\r\nname: crlf\r\ndescription: Windows line ends\r\n---\r\nBody\r\n", "f")
    expect(Either.getOrThrow(windows).instructions).toBe("Body")
    const notMapping = SkillFiles.parse(skillMd("- a\n- b", "Body"), "list/SKILL.md")
    expect(Either.isLeft(notMapping) && notMapping.left.message).toBe(
      "list/SKILL.md: the front matter must be a YAML mapping with `name:` and `description:`"
    )
  })

  it.scoped("a SKILL.md named like a built-in skill is reported, and the built-in stays", () =>
    Effect.gen(function* () {
      const { project } = yield* tempDirs({
        "project/.muse/skills/plan/SKILL.md": skillMd("name: plan\ndescription: My own planning", "Plan it.")
      })
      const { plugin, errors } = yield* SkillsPlugin.load({ projectDir: project, userDir: null })
      expect(errors.map((e) => e.message)).toEqual([
        '.muse/skills/plan/SKILL.md: the name "plan" is taken by the built-in /plan; rename the skill to use it'
      ])
      expect(plugin.skills!.find((s) => s.name === "plan")!.source).toBe("@musekit/plugin-skills")
    })
  )
})
