//! The data workbench against the real engine, on the data image: pandas on a 100,000-row CSV
//! and an .xlsx, numpy under a memory limit, plots and images back as bounded PNGs, the files an
//! execution made listed with resource URIs, resource links, the data helpers on DataFrames,
//! preloaded modules in pooled containers, and `image build --requirements` with a wheel made
//! here, offline. The MCP side (resources over stdio and HTTP with the Python SDK) is
//! `tests/python/workspace_resources.py`, run by the last test.

mod common;

use std::fmt::Write as _;
use std::process::Command;

use common::TestApp;
use serde_json::json;

/// Decodes a returned PNG and checks it is one, of the size it claims.
fn decoded(png: &code_execution_mcp::app::execution::pictures::Png) -> image::DynamicImage {
    assert!(png.bytes.starts_with(b"\x89PNG\r\n\x1a\n"));
    let image = image::load_from_memory_with_format(&png.bytes, image::ImageFormat::Png)
        .expect("a PNG that decodes");
    assert_eq!((image.width(), image.height()), (png.width, png.height));
    image
}

#[tokio::test]
async fn pandas_reads_a_large_csv_and_an_xlsx_and_returns_a_small_summary() {
    let t = TestApp::start().await;
    let mut csv = String::from("id,region,amount\n");
    for i in 0..100_000 {
        let region = ["north", "south", "east", "west"][i % 4];
        writeln!(csv, "{i},{region},{}", i % 1000).unwrap();
    }
    std::fs::write(t.workspace().join("sales.csv"), csv).unwrap();
    let made = t
        .run_full(
            "import pandas as pd\n\
             pd.DataFrame({'region': ['north', 'south'], 'target': [10, 20]}).to_excel('targets.xlsx', index=False)",
        )
        .await;
    assert!(made.outcome.success(), "{:?}", made.outcome.error);
    let files: Vec<_> = made
        .produced
        .files
        .iter()
        .map(|f| (f.path.as_str(), f.change))
        .collect();
    assert_eq!(files, vec![("targets.xlsx", "created")]);
    assert_eq!(
        made.produced.files[0].mime_type,
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
    );
    assert_eq!(made.produced.files[0].uri, "workspace:///targets.xlsx");

    let o = t
        .run(
            "import pandas as pd\n\
             df = pd.read_csv('sales.csv')\n\
             targets = pd.read_excel('targets.xlsx')\n\
             totals = df.groupby('region')['amount'].sum().reset_index().merge(targets, on='region')\n\
             result = {'rows': len(df), 'totals': totals, 'mean': df['amount'].mean()}",
        )
        .await;
    assert!(o.success(), "{:?} {:?}", o.error, o.traceback);
    assert_eq!(
        o.result,
        json!({"rows": 100000, "mean": 499.5, "totals": [
            {"region": "north", "amount": 12450000, "target": 10},
            {"region": "south", "amount": 12475000, "target": 20},
        ]})
    );
    t.finish().await;
}

#[tokio::test]
async fn numpy_past_the_memory_limit_fails_cleanly_as_memory_limit() {
    let t = TestApp::start().await;
    let o = t
        .run_with(
            "import numpy as np\na = np.ones((64, 1024, 1024))\nresult = float(a.sum())",
            None,
            None,
            Some(200.0),
        )
        .await;
    common::assert_memory_killed(&t.app, &o, 200);
    t.finish().await;
}

#[tokio::test]
async fn plots_come_back_as_bounded_pngs_and_images_past_the_limit_are_dropped_with_a_note() {
    let t = TestApp::start_with(|c| {
        c.limits.max_images = 3;
        c.limits.image_max_side = 800;
    })
    .await;
    let ran = t
        .run_full(
            "import matplotlib.pyplot as plt\n\
             plt.plot([1, 2, 3], [1, 4, 9])\n\
             plt.show()\n\
             plt.figure(figsize=(40, 30))\n\
             plt.bar(['a', 'b'], [3, 5])\n\
             plt.show()\n\
             show_image(open('/dev/null', 'rb').read() or bytes.fromhex('89504e470d0a1a0a'), source='broken')\n\
             plt.figure()\n\
             plt.plot([0, 1])\n\
             plt.figure()\n\
             plt.plot([1, 0])\n\
             result = 'left two figures open'",
        )
        .await;
    assert!(
        ran.outcome.success(),
        "{:?} {:?}",
        ran.outcome.error,
        ran.outcome.traceback
    );
    let images = &ran.produced.images;
    let sources: Vec<&str> = images.iter().map(|i| i.source.as_str()).collect();
    assert_eq!(
        sources,
        vec!["figure 1", "figure 2"],
        "{:?}",
        ran.produced.notes
    );
    // Matplotlib's default: 6.4 x 4.8 inches at 100 dpi.
    let first = decoded(&images[0].png);
    assert_eq!(
        (first.width(), first.height(), images[0].png.scaled_from),
        (640, 480, None)
    );
    // 40 x 30 inches is 4000 x 3000 pixels: scaled to the longest side allowed.
    let big = decoded(&images[1].png);
    assert_eq!((big.width(), big.height()), (800, 600));
    assert_eq!(images[1].png.scaled_from, Some((4000, 3000)));
    assert!(images[1].png.bytes.len() <= 1024 * 1024);
    // The third image (a PNG signature alone) does not decode; the fourth and fifth (figures
    // left open) are past the limit of 3. Figures are numbered in the order they are sent.
    let notes = ran.produced.notes.join("\n");
    assert!(
        notes.contains("broken: not returned, cannot decode"),
        "{notes}"
    );
    for figure in ["figure 3", "figure 4"] {
        assert!(
            notes.contains(&format!("{figure}: not returned, at most 3 images")),
            "{notes}"
        );
    }
    t.finish().await;
}

#[tokio::test]
async fn show_image_takes_workspace_files_and_refuses_what_is_no_image() {
    let t = TestApp::start().await;
    let ran = t
        .run_full(
            "from PIL import Image\n\
             Image.new('RGB', (30, 20), 'red').save('red.jpg')\n\
             show_image('red.jpg')\n\
             try:\n    show_image(b'not an image')\nexcept ValueError as e:\n    result = str(e)",
        )
        .await;
    assert!(ran.outcome.success(), "{:?}", ran.outcome.error);
    assert_eq!(
        ran.outcome.result,
        json!("show_image: the data is not a PNG, JPEG, GIF or WebP image")
    );
    assert_eq!(ran.produced.images.len(), 1);
    assert_eq!(ran.produced.images[0].source, "red.jpg");
    let image = decoded(&ran.produced.images[0].png);
    assert_eq!((image.width(), image.height()), (30, 20));
    t.finish().await;
}

#[tokio::test]
async fn resource_links_name_workspace_files_and_missing_ones_get_a_note() {
    let t = TestApp::start().await;
    std::fs::write(t.workspace().join("report.csv"), "a,b\n1,2\n").unwrap();
    let ran = t
        .run_full(
            "uri = resource_link('report.csv', description='the report')\n\
             import os\n\
             os.remove('report.csv')\n\
             open('report.csv', 'w').write('a\\n')\n\
             open('gone.csv', 'w').write('x\\n')\n\
             resource_link('gone.csv')\n\
             os.remove('gone.csv')\n\
             try:\n    resource_link('../etc/passwd')\nexcept PermissionError as e:\n    denied = str(e)\n\
             result = [uri, denied]",
        )
        .await;
    assert!(ran.outcome.success(), "{:?}", ran.outcome.error);
    assert_eq!(
        ran.outcome.result,
        json!([
            "workspace:///report.csv",
            "Access denied: path outside workspace"
        ])
    );
    // The file linked and recreated is returned as it is now; the one linked and then removed
    // is not, and a note says so.
    let links: Vec<_> = ran
        .produced
        .links
        .iter()
        .map(|l| (l.path.as_str(), l.size, l.description.as_deref()))
        .collect();
    assert_eq!(links, [("report.csv", 2, Some("the report"))]);
    assert_eq!(ran.produced.files[0].change, "modified");
    assert_eq!(ran.produced.notes.len(), 1, "{:?}", ran.produced.notes);
    let note = &ran.produced.notes[0];
    assert!(
        note.starts_with("resource_link(\"gone.csv\") not returned:"),
        "{note}"
    );
    t.finish().await;
}

#[tokio::test]
async fn the_data_helpers_and_the_result_take_pandas_and_numpy_values() {
    let t = TestApp::start().await;
    let o = t
        .run(
            "import pandas as pd, numpy as np\n\
             df = pd.DataFrame({'name': ['a', 'b', 'c'], 'score': [1.5, np.nan, 3.0], 'n': [1, 2, 3]})\n\
             result = {\n\
                 'summary': summarize_list(df, 2),\n\
                 'filtered': filter_by_field(df, 'name', 'c'),\n\
                 'stats': aggregate_stats(df),\n\
                 'series': df.set_index('name')['n'],\n\
                 'array': np.arange(3),\n\
                 'scalar': np.int64(7),\n\
                 'nan': np.float64('nan'),\n\
             }",
        )
        .await;
    assert!(o.success(), "{:?} {:?}", o.error, o.traceback);
    assert_eq!(
        o.result,
        json!({
            "summary": {"count": 3, "sample": [
                {"name": "a", "score": 1.5, "n": 1}, {"name": "b", "score": null, "n": 2}]},
            "filtered": [{"name": "c", "score": 3.0, "n": 3}],
            "stats": {"count": 3, "score_sum": 4.5, "score_avg": 2.25, "score_min": 1.5,
                      "score_max": 3.0, "n_sum": 6, "n_avg": 2.0, "n_min": 1, "n_max": 3},
            "series": {"a": 1, "b": 2, "c": 3},
            "array": [0, 1, 2],
            "scalar": 7,
            "nan": null,
        })
    );
    t.finish().await;
}

#[tokio::test]
async fn pooled_containers_import_the_preload_modules_before_their_job() {
    let probe =
        "import sys\nresult = sorted(m for m in ('pandas', 'numpy', 'scipy') if m in sys.modules)";
    let t = TestApp::start_with(|c| {
        c.sandbox.preload = Some(vec!["pandas".into(), "no_such_module".into()])
    })
    .await;
    common::wait_for_full_pool(&t.app, 1).await;
    let o = t.run(probe).await;
    assert_eq!(o.result, json!(["numpy", "pandas"]), "{:?}", o.error);
    assert_eq!(
        o.stderr.as_str(),
        "",
        "nothing the preload printed reaches the job"
    );
    t.finish().await;
    let t = TestApp::start().await; // the tests' default: no preloading
    common::wait_for_full_pool(&t.app, 1).await;
    assert_eq!(t.run(probe).await.result, json!([]));
    t.finish().await;
}

/// A pure-Python wheel, made with the host's Python (a zip with a module and its metadata).
fn make_wheel(dir: &std::path::Path) {
    let script = r#"
import base64, hashlib, sys, zipfile
out = sys.argv[1]
files = {
    "cemtestpkg/__init__.py": b"VALUE = 'from a wheel'\n",
    "cemtestpkg-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: cemtestpkg\nVersion: 1.0\n",
    "cemtestpkg-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = []
with zipfile.ZipFile(f"{out}/cemtestpkg-1.0-py3-none-any.whl", "w") as z:
    for name, data in files.items():
        z.writestr(name, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append("cemtestpkg-1.0.dist-info/RECORD,,")
    z.writestr("cemtestpkg-1.0.dist-info/RECORD", "\n".join(record) + "\n")
"#;
    let status = Command::new("python3")
        .args(["-c", script])
        .arg(dir)
        .status()
        .expect("python3 makes the wheel");
    assert!(status.success());
}

fn image_build(args: &[&str]) -> std::process::Output {
    Command::new(common::BIN)
        .args(["image", "build"])
        .args(args)
        .output()
        .expect("run image build")
}

#[tokio::test]
async fn image_build_requirements_installs_a_wheel_offline_and_names_what_failed() {
    let dir = tempfile::tempdir().unwrap();
    let wheels = dir.path().join("wheels");
    std::fs::create_dir(&wheels).unwrap();
    make_wheel(&wheels);
    let requirements = dir.path().join("requirements.txt");
    std::fs::write(&requirements, "cemtestpkg==1.0\n").unwrap();
    let from = code_execution_mcp::config::Config::defaults()
        .sandbox
        .image_tag();
    let args = |req: &std::path::Path| {
        vec![
            "--requirements".to_string(),
            req.to_str().unwrap().to_string(),
            "--wheels".into(),
            wheels.to_str().unwrap().to_string(),
            "--from".into(),
            from.clone(),
        ]
    };
    let out = image_build(
        &args(&requirements)
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let tag = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(tag.starts_with("code-execution-mcp-sandbox:user-"), "{tag}");

    let t = TestApp::start_with(|c| c.sandbox.image = Some(tag.clone())).await;
    let o = t
        .run("import cemtestpkg, pandas\nresult = cemtestpkg.VALUE")
        .await;
    assert_eq!(o.result, json!("from a wheel"), "{:?}", o.error);
    t.finish().await;

    // A package that is not among the wheels: the error names it.
    let missing = dir.path().join("missing.txt");
    std::fs::write(&missing, "cemtestpkg==1.0\nnot-a-wheel-here==2.0\n").unwrap();
    let out = image_build(
        &args(&missing)
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("not-a-wheel-here==2.0") && stderr.contains("binary wheels"),
        "{stderr}"
    );
    // An unpinned line is refused before anything is built.
    std::fs::write(&missing, "cemtestpkg\n").unwrap();
    let out = image_build(
        &args(&missing)
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("line 1: `cemtestpkg` is not a pinned requirement"),
        "{stderr}"
    );

    let _ = Command::new("docker").args(["rmi", "-f", &tag]).output();
}

#[test]
fn workspace_resources_and_images_over_stdio_and_http_with_the_python_sdk() {
    common::run_python_client("workspace_resources.py");
}
