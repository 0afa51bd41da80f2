// What the input files tell about an acquisition beyond its geometry and its numbers: the
// DICOM-CT-PD reader fills it, the DICOM CT series writer copies the patient and study
// attributes into every slice, and the Hounsfield rescale of the outputs takes the water
// attenuation from it when the JobSpec gives none. Raw and TIFF inputs leave it empty.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tomo::core {

// One DICOM data element copied verbatim (value as DCMTK's string form of the element).
struct DicomAttribute {
  uint16_t group = 0;
  uint16_t element = 0;
  std::string value;
};

struct AcquisitionMetadata {
  // Patient and study module attributes of the input (PatientName, PatientID,
  // PatientBirthDate, PatientSex, StudyInstanceUID, StudyDate, StudyTime, StudyID,
  // AccessionNumber, ReferringPhysicianName, StudyDescription), those present only.
  std::vector<DicomAttribute> patient_study;
  // Linear attenuation of water in 1/mm at the scan's effective energy, when known.
  std::optional<double> water_attenuation_per_mm;
};

}  // namespace tomo::core
