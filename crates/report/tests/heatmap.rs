//! The mesh heat map: the SVG parses, has N×N cells in row-major order, each off-diagonal cell
//! carries its pair's figure (or none where the pair has no result), and the shading runs the
//! right way for throughput and for latency.

use netchar_report::heatmap::{svg, Matrix};
use netchar_report::html::mesh_document;

fn matrix(metric: &str, higher_is_better: bool) -> Matrix {
    Matrix {
        metric: metric.into(),
        unit: if higher_is_better { "Mbit/s".into() } else { "µs".into() },
        higher_is_better,
        names: vec!["node-a".into(), "node-b".into(), "node-<c>".into()],
        cells: vec![
            vec![None, Some(941.25), Some(12.5)],
            vec![Some(500.0), None, None],
            vec![Some(0.125), Some(700.0), None],
        ],
    }
}

/// (source, destination, value, fill) of every `rect.cell`, in document order.
fn cells(svg_text: &str) -> Vec<(String, String, Option<f64>, String)> {
    let doc = roxmltree::Document::parse(svg_text).unwrap_or_else(|e| panic!("{e}:\n{svg_text}"));
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    doc.descendants()
        .filter(|n| n.has_tag_name("rect") && n.attribute("class") == Some("cell"))
        .map(|n| {
            (
                n.attribute("data-source").unwrap().to_string(),
                n.attribute("data-destination").unwrap().to_string(),
                n.attribute("data-value").map(|v| v.parse().unwrap()),
                n.attribute("fill").unwrap().to_string(),
            )
        })
        .collect()
}

fn brightness(fill: &str) -> u32 {
    let hex = fill.trim_start_matches('#');
    (0..3).map(|i| u32::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap()).sum()
}

#[test]
fn every_pair_is_a_cell_with_its_figure_and_missing_pairs_have_none() {
    let m = matrix("throughput", true);
    let found = cells(&svg(&m));
    assert_eq!(found.len(), 9, "N×N cells");
    for (k, (source, destination, value, _)) in found.iter().enumerate() {
        let (i, j) = (k / 3, k % 3);
        assert_eq!((source, destination), (&m.names[i], &m.names[j]), "row-major order");
        assert_eq!(*value, m.cells[i][j], "{source} → {destination}");
    }
    // The hatched pattern for the missing pair (node-b → node-<c>), white on the diagonal.
    assert!(found[5].3.starts_with("url(#missing-"), "{:?}", found[5]);
    assert_eq!(found[4].3, "#fff");
}

#[test]
fn the_better_figure_is_the_darker_cell() {
    let fills = |m: &Matrix| -> Vec<(f64, u32)> {
        cells(&svg(m)).into_iter().filter_map(|(_, _, v, f)| Some((v?, brightness(&f)))).collect()
    };
    let darkest = |f: &[(f64, u32)]| f.iter().min_by_key(|x| x.1).unwrap().0;
    let palest = |f: &[(f64, u32)]| f.iter().max_by_key(|x| x.1).unwrap().0;
    let t = fills(&matrix("throughput", true));
    assert_eq!((darkest(&t), palest(&t)), (941.25, 0.125));
    let l = fills(&matrix("latency", false));
    assert_eq!((darkest(&l), palest(&l)), (0.125, 941.25));
}

#[test]
fn the_mesh_report_is_self_contained_with_one_heat_map_per_matrix() {
    let lines = "{\"source\":\"node-a\",\"destination\":\"node-b\"}\n";
    let html = mesh_document(&[matrix("throughput", true), matrix("rtt", false)], lines);
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("default-src 'none'"));
    for forbidden in ["http://", "https://", "src=", "<link", "@import"] {
        let outside_svg_namespace = html.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
        assert!(!outside_svg_namespace.contains(forbidden), "loads something: {forbidden}");
    }
    let maps: Vec<&str> = html.split("<svg class=\"heatmap\"").skip(1).collect();
    assert_eq!(maps.len(), 2);
    for m in maps {
        let end = m.find("</svg>").unwrap() + "</svg>".len();
        assert_eq!(cells(&format!("<svg class=\"heatmap\"{}", &m[..end])).len(), 9);
    }
    // Names are escaped in the tables and in the SVG.
    assert!(html.contains("node-&lt;c&gt;") && !html.contains("node-<c>"));
    assert!(html.contains("<table id=\"matrix-throughput\"") && html.contains("<table id=\"matrix-rtt\""));
    assert!(html.contains("&quot;source&quot;:&quot;node-a&quot;"), "the raw lines");
}
